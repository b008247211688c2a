package app

import (
	"fmt"
	"io"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
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
	return cleanup(dp, o.DryRun, o.CleanupTableOnly, stderr)
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
