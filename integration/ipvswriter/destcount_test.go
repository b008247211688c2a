//go:build integration

package ipvswriter

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestCheckFindsADeletedDestinationAmongThousands: on a node with 2,000
// virtual servers, a destination deleted by hand from the last of them
// is found by the next Check, which counts every virtual server's
// destinations in one read of /proc/net/ip_vs instead of reading them
// one virtual server per request; an unchanged kernel passes.
func TestCheckFindsADeletedDestinationAmongThousands(t *testing.T) {
	h := clean(t)
	w := newWriter(t, ipvs.Config{})
	const n = 2000
	var sps []policy.ServicePlan
	for i := range n {
		addr := fmt.Sprintf("10.97.%d.%d:80/TCP", i/250, i%250+1)
		sps = append(sps, svc(fmt.Sprintf("s%d", i), vs("ClusterIP "+addr, "10.244.1.5:8080", "10.244.1.6:8080")))
	}
	if err := w.Resync(plan(sps...)); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if err := w.Check(); err != nil {
		t.Fatalf("Check of the kernel as programmed: %v", err)
	}
	last := fmt.Sprintf("10.97.%d.%d", (n-1)/250, (n-1)%250+1)
	if err := h.DelDestination(mobyService(last, 80, unix.IPPROTO_TCP),
		&mobyipvs.Destination{Address: net.ParseIP("10.244.1.6").To4(), Port: 8080, AddressFamily: unix.AF_INET}); err != nil {
		t.Fatalf("DelDestination: %v", err)
	}
	time.Sleep(time.Second) // Check reads the kernel at most once a second
	start := time.Now()
	err := w.Check()
	took := time.Since(start)
	if !errors.Is(err, ipvs.ErrDrift) || !strings.Contains(err.Error(), last+":80/TCP") {
		t.Fatalf("Check: %v; want the drift of %s:80/TCP", err, last)
	}
	t.Logf("found by one Check in %v: %v", took, err)
}
