//go:build integration

package ipvswriter

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/fakeapi"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// loopObjects is this node and n ClusterIP services 10.100.x.y:80/TCP
// with one EndpointSlice of 10 ready endpoints each, on another node.
func loopObjects(n int) []runtime.Object {
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.10"}}}}}
	for i := range n {
		objs = append(objs, loopService(i), loopSlice(i, 0))
	}
	return objs
}

func loopService(i int) *corev1.Service {
	ip := netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)}).String()
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "scale", Name: fmt.Sprintf("svc-%d", i)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
}

// loopSlice is service i's EndpointSlice; generation g > 0 replaces its
// first endpoint with 10.250.g.i.
func loopSlice(i, g int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "scale", Name: fmt.Sprintf("svc-%d-1", i),
			Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("svc-%d", i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for j := range 10 {
		a := netip.AddrFrom4([4]byte{10, byte(200 + j), byte(i >> 8), byte(i)})
		if j == 0 && g > 0 {
			a = newEndpoint(i, g)
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To("node-b")})
	}
	return s
}

func newEndpoint(i, g int) netip.Addr { return netip.AddrFrom4([4]byte{10, 250, byte(g), byte(i)}) }

// fullResyncOnly hides a DataPlane's repair in slices: the loop's
// periodic resync is then the full Resync of a recomputed plan, as
// before the repair in slices.
type fullResyncOnly struct{ proxier.DataPlaneWriter }

func (fullResyncOnly) StartRepair() error { return proxier.ErrNoRepair }

// TestLoopChangesDoNotWaitBehindResync runs the whole loop (informers
// over a fake API, the engine, the real DataPlane) over
// KIP_SCALE_SERVICES services (default 300) x 10 endpoints with a 10 s
// sync period, and makes 20 endpoint changes spread over three periods:
// each is timed from the API update to the new destination in the
// kernel's IPVS table (polled), so changes made while a periodic resync
// runs are measured too. It does so twice in one boot: first with the
// periodic resync as it was (a full Resync of a recomputed plan, which
// holds changes up), then as it is (a repair in slices). It logs every
// latency; only the second run is checked, and only far above the target
// (1 s at 5000 services).
func TestLoopChangesDoNotWaitBehindResync(t *testing.T) {
	n := labnet.ScaleServices(t, 300)
	h := clean(t)
	client := fake.NewClientset(loopObjects(n)...)
	for run, mode := range []string{"full-resync", "repair"} {
		t.Run(mode, func(t *testing.T) {
			dp, err := proxier.NewDataPlane(proxier.DataPlaneConfig{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}})
			if err != nil {
				t.Fatalf("NewDataPlane: %v", err)
			}
			defer dp.Close()
			var w proxier.DataPlaneWriter = dp
			if mode == "full-resync" {
				w = fullResyncOnly{dp}
			}
			max := loopLatencies(t, h, client, w, n, 20*run)
			if mode == "repair" && max > 5*time.Second {
				t.Errorf("slowest change took %v from the API to the kernel, want well under 5 s", max)
			}
		})
	}
	dp, err := proxier.NewDataPlane(proxier.DataPlaneConfig{})
	if err != nil {
		t.Fatalf("NewDataPlane: %v", err)
	}
	defer dp.Close()
	if err := dp.Cleanup(); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
}

// loopLatencies runs a Proxier over client and w, makes 20 endpoint
// changes (generations g0+1 to g0+20), logs their latencies and returns
// the longest.
func loopLatencies(t *testing.T, h *mobyipvs.Handle, client *fake.Clientset, w proxier.DataPlaneWriter, n, g0 int) time.Duration {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	period := 10 * time.Second
	p, err := proxier.New(proxier.Config{NodeName: "node-a", Client: fakeapi.Client(client), MetadataClient: metadatafake.NewSimpleMetadataClient(scheme),
		DataPlane: w, SyncPeriod: period})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	for p.Stats().Syncs == 0 {
		if time.Since(start) > 15*time.Minute {
			t.Fatalf("no first sync after %v", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("first sync (full Resync of %d services x 10 endpoints): %v", n, time.Since(start).Round(time.Millisecond))
	const changes = 20
	spread := 3 * period / changes
	var lat []time.Duration
	during := 0
	for c := range changes {
		time.Sleep(spread)
		g := g0 + c + 1
		i := (g*7919 + 13) % n
		s := loopService(i)
		svc := &mobyipvs.Service{Address: net.ParseIP(s.Spec.ClusterIP).To4(), Port: 80, Protocol: unix.IPPROTO_TCP,
			AddressFamily: unix.AF_INET, Netmask: 0xffffffff}
		want := newEndpoint(i, g).String()
		before := p.Stats()
		t0 := time.Now()
		if _, err := client.DiscoveryV1().EndpointSlices("scale").Update(ctx, loopSlice(i, g), metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update slice of service %d: %v", i, err)
		}
		for {
			ds, err := h.GetDestinations(svc)
			if err != nil {
				t.Fatalf("GetDestinations %s: %v", s.Spec.ClusterIP, err)
			}
			if slices.ContainsFunc(ds, func(d *mobyipvs.Destination) bool { return d.Address.String() == want }) {
				break
			}
			if time.Since(t0) > 3*time.Minute {
				t.Fatalf("change %d (service %d): %s not in the kernel after %v", c, i, want, time.Since(t0))
			}
			time.Sleep(10 * time.Millisecond)
		}
		d := time.Since(t0)
		note := ""
		if after := p.Stats(); before.Repairing || after.FullSyncs > before.FullSyncs {
			note = " (during a periodic resync)"
			during++
		}
		t.Logf("change %2d, service %4d: event -> kernel %v%s", c, i, d.Round(time.Millisecond), note)
		lat = append(lat, d)
	}
	slices.Sort(lat)
	st := p.Stats()
	t.Logf("RESULT loop n=%d period=%v changes=%d max=%v median=%v during-resync=%d fullSyncs=%d (repairs %d) syncs=%d; last repair %+v",
		n, period, changes, lat[len(lat)-1].Round(time.Millisecond), lat[len(lat)/2].Round(time.Millisecond), during,
		st.FullSyncs, st.Repairs, st.Syncs, st.LastRepair)
	if st.FullSyncs < 2 {
		t.Errorf("%d full syncs (first and periodic) during the changes, want at least 2 (stats %+v)", st.FullSyncs, st)
	}
	return lat[len(lat)-1]
}
