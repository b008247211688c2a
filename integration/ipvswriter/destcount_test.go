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
// is found by Check within seconds, because Check counts every virtual
// server's destinations in one read of /proc/net/ip_vs instead of
// reading them one virtual server per request (a pass of those at
// Check's budget takes minutes here); an unchanged kernel passes. The
// count is read again after at least fifty times its last read's
// duration, so the time to find it is logged with that duration.
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
	k, _, _, closeK, err := ipvs.NewLinuxAdapters()
	if err != nil {
		t.Fatal(err)
	}
	defer closeK()
	start := time.Now()
	counts, err := k.DestinationCounts()
	if err != nil || len(counts) != n {
		t.Fatalf("DestinationCounts: %d virtual servers, %v; want %d", len(counts), err, n)
	}
	read := time.Since(start)
	t.Logf("one read of every count: %v", read)

	last := fmt.Sprintf("10.97.%d.%d", (n-1)/250, (n-1)%250+1)
	if err := h.DelDestination(mobyService(last, 80, unix.IPPROTO_TCP),
		&mobyipvs.Destination{Address: net.ParseIP("10.244.1.6").To4(), Port: 8080, AddressFamily: unix.AF_INET}); err != nil {
		t.Fatalf("DelDestination: %v", err)
	}
	start = time.Now()
	for {
		err := w.Check()
		if errors.Is(err, ipvs.ErrDrift) && strings.Contains(err.Error(), last+":80/TCP") {
			t.Logf("found %v after the deletion: %v", time.Since(start), err)
			break
		}
		if err != nil {
			t.Fatalf("Check: %v; want the drift of %s:80/TCP", err, last)
		}
		if within := 2*time.Second + 100*read; time.Since(start) > within {
			t.Fatalf("the deleted destination of %s:80/TCP not found within %v", last, within)
		}
		time.Sleep(50 * time.Millisecond) // the loop's probe interval is 500 ms
	}
}
