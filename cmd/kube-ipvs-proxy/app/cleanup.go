package app

import (
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
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
//
// With --cleanup-table-only it first waits, up to --cleanup-wait, for
// kube-proxy's rules; if they do not come it leaves the table, says so in
// one line and a Node Event, and exits 0: a one-shot that failed would
// be restarted for ever, and the table is what keeps Services working.
func runCleanup(o *Options, stderr io.Writer) int {
	dp, err := proxier.NewDataPlane(o.RunConfig().DataPlane)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: %v\n", err)
		return ExitError
	}
	defer dp.Close()
	if o.CleanupTableOnly && !o.DryRun && o.CleanupWait > 0 {
		w := waiter{serves: leftovers.KubeProxyServesOnHost, sleep: time.Sleep, limit: o.CleanupWait, stderr: stderr}
		form := w.wait()
		if form == "" {
			msg := w.timeoutMessage()
			fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: %s\n", msg)
			if err := nodeEvent(o, reasonKubeProxyRulesMissing, msg); err != nil {
				fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: no Node Event: %v\n", err)
			}
			return ExitOK
		}
		fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: kube-proxy's rules are in the kernel (%s)\n", form)
	}
	return cleanup(dp, o.DryRun, o.CleanupTableOnly, stderr)
}

// tableCleanupEvery is how often --cleanup-table-only looks for
// kube-proxy's rules.
const tableCleanupEvery = time.Second

// reasonKubeProxyRulesMissing is the reason of the Node Event of a
// --cleanup-table-only that left our table.
const reasonKubeProxyRulesMissing = "KubeProxyRulesMissing"

// waiter waits until serves finds kube-proxy's rules in the kernel, for
// at most limit. After a rollback our table is the node's only masquerade
// until kube-proxy's first sync has written its own, and kube-proxy's
// /healthz answers 200 before that sync, and the sync creates its chains
// empty long before it fills them: removing the table on either signal
// cut NodePort traffic to other nodes' endpoints until the rules came.
// A failed look is said once and looked again: it is no reason to remove
// the table, nor to stop waiting.
type waiter struct {
	serves func() (string, error) // the form found, "" for none
	sleep  func(time.Duration)
	limit  time.Duration
	stderr io.Writer
	said   bool
	err    error // the last failed look
}

// wait returns the form of kube-proxy's rules found, or "" once limit
// passed without them.
func (w *waiter) wait() string {
	for waited := time.Duration(0); ; waited += tableCleanupEvery {
		form, err := w.serves()
		if form != "" {
			return form
		}
		if err != nil && (w.err == nil || err.Error() != w.err.Error()) {
			fmt.Fprintf(w.stderr, "kube-ipvs-proxy: cleanup: look for kube-proxy's rules: %v\n", err)
		}
		w.err = err
		if waited >= w.limit {
			return ""
		}
		if !w.said {
			fmt.Fprintf(w.stderr, "kube-ipvs-proxy: cleanup: waiting up to %v for kube-proxy's rules before removing our table\n", w.limit)
			w.said = true
		}
		w.sleep(tableCleanupEvery)
	}
}

// timeoutMessage is the one line (and the Event's message) of a wait
// that ran out.
func (w *waiter) timeoutMessage() string {
	msg := fmt.Sprintf("kube-proxy's rules are not in the kernel after %v (looked for: rules in its nat KUBE-SERVICES and KUBE-POSTROUTING, "+
		"with iptables-nft or iptables-legacy, and its nftables mode's tables ip/ip6 kube-proxy): our table inet kube-ipvs-proxy stays, "+
		"so that Services keep their masquerade; once kube-proxy runs, run --cleanup --cleanup-table-only again, or with --cleanup-wait=0 to remove it at once", w.limit)
	if w.err != nil {
		msg += fmt.Sprintf(" (last look failed: %v)", w.err)
	}
	return msg
}

// nodeEvent records a Warning Event on this node, once, through the API
// client of the flags (kubeconfig and master, else in-cluster).
func nodeEvent(o *Options, reason, msg string) error {
	rc := o.RunConfig()
	cfg, err := restConfig(rc.Client)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	cs, err := kubeclient.New(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	return recordNodeEvent(cs.EventSink(), rc.NodeName, reason, msg, time.Now())
}

// recordNodeEvent creates a Warning Event on Node node, as the proxy's
// recorder would (in namespace default, the Node's name as its UID).
func recordNodeEvent(sink record.EventSink, node, reason, msg string, at time.Time) error {
	now := metav1.NewTime(at)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: node + ".", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)},
		Reason:         reason, Message: truncateEvent(msg), Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kube-ipvs-proxy", Host: node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := sink.Create(ev); err != nil {
		return fmt.Errorf("create Event on Node %s: %w", node, err)
	}
	return nil
}

// truncateEvent keeps a message within the API's limit for Events.
func truncateEvent(msg string) string {
	const max = 1024
	if len(msg) > max {
		return msg[:max-3] + "..."
	}
	return msg
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
