package proxier

import (
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
