package proxier

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// lastExternal renders the last programmed ExternalIP virtual servers of
// svc as "address bound|unbound", sorted.
func lastExternal(tp *testProxier, svc string) string {
	calls := tp.dp.snapshot()
	for i := len(calls) - 1; i >= 0; i-- {
		vss := calls[i].plan.VirtualServers
		found := calls[i].resync
		for _, sp := range calls[i].changes {
			if sp.Service == key(svc) {
				vss, found = sp.VirtualServers, true
			}
		}
		if !found {
			continue
		}
		var out []string
		for _, vs := range vss {
			if vs.Service == key(svc) && vs.Kind == policy.KindExternalIP {
				b := "bound"
				if !vs.Bound() {
					b = "unbound"
				}
				out = append(out, vs.Address.String()+" "+b)
			}
		}
		slices.Sort(out)
		return strings.Join(out, ", ")
	}
	return "<none>"
}

// TestRunEveryNodesAddressIsANodeAddress: the Nodes informer watches
// every Node, so that an external IP that is another node's InternalIP is
// served unbound here, as the dry run plans it; the address moving or
// the Node going re-plans the service.
func TestRunEveryNodesAddressIsANodeAddress(t *testing.T) {
	ctx := context.Background()
	ext := service("ext", "10.96.0.30", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.168.0.11", "203.0.113.9"} })
	tp := newTestProxier(t, nil, node(testNode, "192.168.0.10", nil), node("node-b", "192.168.0.11", nil), ext)
	tp.start(t)
	nodes := tp.client.CoreV1().Nodes()
	steps := []struct {
		name     string
		act      func() error
		want     string
		wantCall []string
	}{
		{"another node's address is served unbound from the start", func() error { return nil },
			"192.168.0.11 unbound, 203.0.113.9 bound", nil},
		{"the address moving away binds it again",
			func() error {
				_, err := nodes.Update(ctx, node("node-b", "192.168.0.12", nil), metav1.UpdateOptions{})
				return err
			}, "192.168.0.11 bound, 203.0.113.9 bound", []string{"Apply default/ext[3]"}},
		{"the address coming back unbinds it",
			func() error {
				_, err := nodes.Update(ctx, node("node-b", "192.168.0.11", nil), metav1.UpdateOptions{})
				return err
			}, "192.168.0.11 unbound, 203.0.113.9 bound", []string{"Apply default/ext[3]"}},
		{"the Node going binds it again",
			func() error { return nodes.Delete(ctx, "node-b", metav1.DeleteOptions{}) },
			"192.168.0.11 bound, 203.0.113.9 bound", []string{"Apply default/ext[3]"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before, calls := tp.Stats().Syncs, len(tp.dp.snapshot())
			if err := st.act(); err != nil {
				t.Fatal(err)
			}
			if st.wantCall != nil {
				tp.syncedAfter(t, before)
				if got := describeAll(tp.dp.snapshot()[calls:]); !cmp.Equal(got, st.wantCall) {
					t.Errorf("data plane calls: got %v, want %v", got, st.wantCall)
				}
			}
			if got := lastExternal(tp, "ext"); got != st.want {
				t.Errorf("external IPs: %s, want %s", got, st.want)
			}
		})
	}
}
