package app

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/leftovers"
)

// firstSync is the loop's Health that also says when the first sync
// applied: Done closes then.
type firstSync struct {
	proxier.Health
	once sync.Once
	done chan struct{}
}

func newFirstSync(h proxier.Health) *firstSync {
	return &firstSync{Health: h, done: make(chan struct{})}
}

func (f *firstSync) Updated() {
	f.Health.Updated()
	f.once.Do(func() { close(f.done) })
}

// Done closes when the first sync has applied.
func (f *firstSync) Done() <-chan struct{} { return f.done }

// leftoverIPSets is kube_ipvs_proxy_kube_proxy_leftover_ipsets: the
// ipsets of kube-proxy's that could not be removed (held by
// iptables-legacy rules), 0 once the take-over cleaned up.
func leftoverIPSets(reg prometheus.Registerer) (prometheus.Gauge, error) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kube_ipvs_proxy_kube_proxy_leftover_ipsets",
		Help: "ipsets of kube-proxy's IPVS mode left on the node after the take-over because rules outside kube-proxy's chains, or an iptables-legacy table this proxy could not change, still reference them.",
	})
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("register kube_ipvs_proxy_kube_proxy_leftover_ipsets: %w", err)
	}
	return g, nil
}

// takeOver removes what kube-proxy's IPVS mode left on the node (package
// proxier/leftovers) once our first sync has applied, so that its rules
// serve until ours do. It logs what it removed; what it cannot remove is
// a Warning Event on the Node and the gauge. It runs once, in wg.
func takeOver(ctx context.Context, wg *sync.WaitGroup, first <-chan struct{}, rec record.EventRecorder,
	node string, stuck prometheus.Gauge, remove func() (leftovers.Result, error)) {
	logger := klog.FromContext(ctx)
	wg.Go(func() {
		select {
		case <-ctx.Done():
			return
		case <-first:
		}
		res, err := remove()
		if err != nil {
			logger.Error(err, "Failed to remove kube-proxy's leftovers", "removedChains", res.Chains, "removedIPSets", res.IPSets)
		}
		stuck.Set(float64(len(res.Stuck)))
		for _, l := range res.Legacy {
			logger.Info("Removed kube-proxy's iptables-legacy chains after the first sync",
				"table", l.Table, "chains", len(l.Chains), "jumpRules", len(l.Rules), "removedChains", l.Chains,
				"keptKubeForward", l.KeptForward)
		}
		if !res.Empty() {
			logger.Info("Removed kube-proxy's iptables chains and ipsets after the first sync",
				"chains", res.Chains, "jumpRules", len(res.Rules), "ipsets", res.IPSets)
		}
		if len(res.Stuck) == 0 {
			return
		}
		msg := fmt.Sprintf("kube-proxy's ipsets %s are still in use by iptables rules outside kube-proxy's chains, or in a table this proxy could not change (see its log)", strings.Join(res.Stuck, ", "))
		if len(res.LegacyTables) > 0 {
			msg += fmt.Sprintf(" (iptables-legacy tables: %s); remove those rules with iptables-legacy, then the ipsets with ipset destroy, or reboot the node", strings.Join(res.LegacyTables, ", "))
		}
		logger.Info("kube-proxy's leftovers remain", "ipsets", res.Stuck, "legacyTables", res.LegacyTables)
		ref := &corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}
		rec.Event(ref, corev1.EventTypeWarning, "KubeProxyLeftovers", msg)
	})
}
