package app

import (
	"fmt"
	"io"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/leftovers"
)

// cleaner is what --cleanup needs of the data plane: Clean removes all of
// ours, CleanTable only the nftables table (--cleanup-table-only).
type cleaner interface {
	Clean(dryRun bool) (proxier.Removed, error)
	CleanTable(dryRun bool) (proxier.Removed, error)
}

// runCleanup removes what the proxy programmed: our IPVS virtual servers
// on the dummy interface's addresses and the NodePort ones our nftables
// table records, the dummy interface, and the table. Foreign virtual
// servers and tables are left alone. It lists on stderr what it removed,
// or with --dry-run what it would remove.
func runCleanup(o *Options, stderr io.Writer) int {
	dp, err := proxier.NewDataPlane(o.RunConfig().DataPlane)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: %v\n", err)
		return ExitError
	}
	defer dp.Close()
	if o.CleanupTableOnly && !o.DryRun {
		if err := waitForKubeProxy(leftovers.KubeProxyServesOnHost, time.Sleep, tableCleanupWait, stderr); err != nil {
			fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: %v\n", err)
			return ExitError
		}
	}
	return cleanup(dp, o.DryRun, o.CleanupTableOnly, stderr)
}

// How long --cleanup-table-only waits for kube-proxy's rules, and how
// often it looks.
const (
	tableCleanupWait  = 5 * time.Minute
	tableCleanupEvery = time.Second
)

// waitForKubeProxy waits until serves says kube-proxy's rules are in the
// kernel, for at most limit. After a rollback our table is the node's
// only masquerade until kube-proxy's first sync has written its own, and
// kube-proxy's /healthz answers 200 before that sync, and the sync
// creates its chains empty long before it fills them: removing the table
// on either signal cut NodePort traffic to other nodes' endpoints until
// the rules came. Not seeing them in time is an error, and the table
// stays.
func waitForKubeProxy(serves func() (bool, error), sleep func(time.Duration), limit time.Duration, stderr io.Writer) error {
	said := false
	for waited := time.Duration(0); ; waited += tableCleanupEvery {
		ok, err := serves()
		if err != nil {
			return fmt.Errorf("look for kube-proxy's rules: %w", err)
		}
		if ok {
			return nil
		}
		if waited >= limit {
			return fmt.Errorf("kube-proxy's rules (rules in its nat KUBE-SERVICES and KUBE-POSTROUTING, as nftables objects) are not in the kernel after %v: our table stays, so that Services keep their masquerade; is kube-proxy running, with iptables-nft?", limit)
		}
		if !said {
			fmt.Fprintln(stderr, "kube-ipvs-proxy: cleanup: waiting for kube-proxy's rules before removing our table")
			said = true
		}
		sleep(tableCleanupEvery)
	}
}

func cleanup(dp cleaner, dryRun, tableOnly bool, stderr io.Writer) int {
	clean := dp.Clean
	if tableOnly {
		clean = dp.CleanTable
	}
	removed, err := clean(dryRun)
	verb, none := "removed", "nothing of ours to remove"
	if dryRun {
		verb, none = "would remove", "nothing of ours to remove; --dry-run: nothing changed"
	}
	lines := removed.Lines()
	for _, l := range lines {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: %s %s\n", verb, l)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: %v\n", err)
		return ExitError
	}
	if len(lines) == 0 {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: %s\n", none)
	} else if dryRun {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: --dry-run: nothing changed\n")
	}
	return ExitOK
}
