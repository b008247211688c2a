package udpflows

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Table is the kernel's conntrack table as the Reconciler uses it.
type Table interface {
	// DeleteUDP walks the UDP flows of one family (IPv6 when v6, else
	// IPv4), deletes each one stale reports true for and returns how
	// many it deleted, also with an error. Flows of other protocols are
	// never given to stale. A walk the kernel interrupted (the table
	// changed under it) is walked again, a few times at most.
	DeleteUDP(v6 bool, stale func(policy.UDPFlow) bool) (int, error)
}

// Result is one family's reconcile: how many flows it deleted, and how
// long it took (kube-proxy's conntrack_reconciler metrics).
type Result struct {
	Family  corev1.IPFamily
	Deleted int
	Elapsed time.Duration
}

// Reconciler deletes stale UDP conntrack flows.
type Reconciler struct {
	table Table
	clock clock.PassiveClock
}

// New returns a Reconciler over table, timed by clk.
func New(table Table, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{table: table, clock: clk}
}

// Reconcile deletes, in each family that has UDP virtual servers with
// serving endpoints (rules.Families), the flows rules calls stale. It
// returns each family's result, also when that family failed (what was
// deleted before the failure counts), and the failures joined, each
// naming its family. Rules without UDP virtual servers read nothing.
func (r *Reconciler) Reconcile(rules policy.StaleUDPFlows) ([]Result, error) {
	v4, v6 := rules.Families()
	var out []Result
	var errs []error
	for _, fam := range []struct {
		on   bool
		v6   bool
		name corev1.IPFamily
	}{{v4, false, corev1.IPv4Protocol}, {v6, true, corev1.IPv6Protocol}} {
		if !fam.on {
			continue
		}
		start := r.clock.Now()
		n, err := r.table.DeleteUDP(fam.v6, rules.Stale)
		out = append(out, Result{Family: fam.name, Deleted: n, Elapsed: r.clock.Since(start)})
		if err != nil {
			errs = append(errs, fmt.Errorf("delete stale %s UDP conntrack flows (%d deleted): %w", fam.name, n, err))
		}
	}
	return out, errors.Join(errs...)
}
