package proxier

import (
	"slices"
	"testing"

	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestPlanEventNamesTheObjectItIsAbout: a plan warning about another
// object of the Service (an EndpointSlice's endpoint left out) is an
// Event on the Service that names that object; one about the Service
// itself does not name it again.
func TestPlanEventNamesTheObjectItIsAbout(t *testing.T) {
	key := policy.ServiceKey{Namespace: "default", Name: "web"}
	rec := record.NewFakeRecorder(10)
	pe := newPlanEvents(rec)
	pe.services(klog.Background(), []policy.ServicePlan{{Service: key, Warnings: []policy.Warning{
		{Object: "Service default/web", Field: "spec.externalIPs[0]", Reason: policy.ReasonRefusedAddress, Service: key,
			Message: "127.0.0.1 is a loopback address, which no Service may take; not served"},
		{Object: "EndpointSlice default/web-1", Field: "endpoints[0].addresses[0]", Reason: policy.ReasonRefusedAddress, Service: key,
			Message: "127.0.0.1 is a loopback address, which no Service may take; endpoint left out"},
	}}})
	want := []string{
		"Warning RefusedAddress spec.externalIPs[0]: 127.0.0.1 is a loopback address, which no Service may take; not served",
		"Warning RefusedAddress EndpointSlice default/web-1: endpoints[0].addresses[0]: 127.0.0.1 is a loopback address, which no Service may take; endpoint left out",
	}
	for _, w := range want {
		select {
		case got := <-rec.Events:
			if got != w {
				t.Errorf("event %q, want %q", got, w)
			}
		default:
			t.Fatalf("no event, want %q", w)
		}
	}
}

// TestWarnedPlansReportAsTheWholePlans: a full sync keeps, of every
// service's plan, only what planEvents.services reads (warned): the same
// Events follow, sync after sync, as from the whole plans, a service
// whose warnings cleared included (it is kept to be forgotten, so that
// the same warning again is an Event again), and no virtual servers are
// kept.
func TestWarnedPlansReportAsTheWholePlans(t *testing.T) {
	a, b := policy.ServiceKey{Namespace: "default", Name: "a"}, policy.ServiceKey{Namespace: "default", Name: "b"}
	warning := func(k policy.ServiceKey) []policy.Warning {
		return []policy.Warning{{Object: "Service " + k.String(), Field: "spec.externalIPs[0]", Reason: policy.ReasonRefusedAddress,
			Service: k, Message: "127.0.0.1 is a loopback address, which no Service may take; not served"}}
	}
	vss := []policy.VirtualServer{{Service: a, Port: 80}}
	syncs := []struct {
		name  string
		plans []policy.ServicePlan
	}{
		{"a warns", []policy.ServicePlan{{Service: a, VirtualServers: vss, Warnings: warning(a)}, {Service: b, VirtualServers: vss}}},
		{"a's warning cleared, b warns", []policy.ServicePlan{{Service: a, VirtualServers: vss}, {Service: b, VirtualServers: vss, Warnings: warning(b)}}},
		{"a warns again", []policy.ServicePlan{{Service: a, VirtualServers: vss, Warnings: warning(a)}, {Service: b, VirtualServers: vss, Warnings: warning(b)}}},
	}
	whole, kept := record.NewFakeRecorder(10), record.NewFakeRecorder(10)
	pw, pk := newPlanEvents(whole), newPlanEvents(kept)
	for _, s := range syncs {
		t.Run(s.name, func(t *testing.T) {
			warned := pk.warned(s.plans)
			for _, sp := range warned {
				if sp.VirtualServers != nil {
					t.Errorf("warned keeps %s's virtual servers", sp.Service)
				}
			}
			pw.services(klog.Background(), s.plans)
			pk.services(klog.Background(), warned)
			if got, want := drain(kept.Events), drain(whole.Events); !slices.Equal(got, want) {
				t.Errorf("events %q, want %q", got, want)
			}
		})
	}
}

// drain returns the events recorded so far.
func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}
