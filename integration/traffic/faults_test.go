//go:build integration

package traffic

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/moby/ipvs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/health"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/fakeapi"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// loop is the whole proxy on the lab's node-a: the sync loop over a fake
// API (client-go's fake clientset), the real data plane, metrics and
// health, with the periodic resync an hour away so that only the loop's
// own fault handling can repair anything.
type loop struct {
	*harness
	p      *proxier.Proxier
	dp     *proxier.DataPlane
	client *fake.Clientset
	reg    *prometheus.Registry
	health *health.ProxyHealth
	events *record.FakeRecorder
}

func newLoop(t *testing.T, h *harness, objs ...runtime.Object) *loop {
	t.Helper()
	dp, err := proxier.NewDataPlane(proxier.DataPlaneConfig{Interface: "kube-ipvs0", ClusterCIDRs: clusterCIDRs, GracefulPeriod: time.Second})
	if err != nil {
		t.Fatalf("NewDataPlane: %v", err)
	}
	l := &loop{harness: h, dp: dp, client: fake.NewClientset(objs...), reg: prometheus.NewRegistry(),
		health: health.NewProxyHealth(time.Hour, nil), events: record.NewFakeRecorder(100)}
	scheme := metadatafake.NewTestScheme()
	h.must(metav1.AddMetaToScheme(scheme))
	l.p, err = proxier.New(proxier.Config{NodeName: nodeA, Engine: policy.Config{ClusterCIDRs: []string{"10.244.0.0/16"}},
		SyncPeriod: time.Hour, Client: fakeapi.Client(l.client), MetadataClient: metadatafake.NewSimpleMetadataClient(scheme), DataPlane: dp,
		Observer: metrics.New(l.reg), Health: l.health, Recorder: l.events})
	h.must(err)
	ctx, cancel := context.WithCancel(context.Background())
	h.must(dp.WatchForeignEdits(ctx))
	done := make(chan error, 1)
	go func() { done <- l.p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if err := dp.Cleanup(); err != nil {
			t.Errorf("data plane Cleanup: %v", err)
		}
		dp.Close()
		checkDataPlaneGone(t)
	})
	return l
}

// k8sNodeA is node-a's Node.
func k8sNodeA() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeA},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP4(1).String()}}}}
}

// k8sService is default/<name>: TCP port 80 on clusterIP.
func k8sService(name, clusterIP string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
}

// k8sSlice is the IPv4 EndpointSlice of default/<svc>: the pods' echo
// servers, ready.
func (h *harness) k8sSlice(svc string, pods ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: svc + "-v4", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(podTCPPort))}},
	}
	for _, name := range pods {
		p := h.pod(name)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.v4.String()}, NodeName: ptr.To(p.node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// answeredBy polls a TCP exchange from `from` to addr until want answers
// or the deadline passes; it returns how long that took.
func (l *loop) answeredBy(from *host, addr, want string, within time.Duration) (time.Duration, error) {
	start := time.Now()
	var last string
	var lastErr error
	for time.Since(start) < within {
		name, _, err := l.Exchange(from, TCP, addr, 300*time.Millisecond)
		if err == nil && name == want {
			return time.Since(start), nil
		}
		last, lastErr = name, err
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), fmt.Errorf("%s from %s: not answered by %s within %v (last: %q, %v)", addr, from, want, within, last, lastErr)
}

// metric returns the value of a counter or gauge (labels as "k=v,..."),
// 0 when absent.
func (l *loop) metric(name, labels string) float64 {
	mfs, err := l.reg.Gather()
	l.must(err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			if strings.Join(ls, ",") != labels {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// healthz is the code /healthz answers.
func (l *loop) healthz() int {
	rec := httptest.NewRecorder()
	l.health.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code
}

// TestMissingSchedulerModuleStaysWithItsService: one service names a
// scheduler whose module the kernel cannot load (no such file or
// directory). The other services are still programmed and later updated
// incrementally; the broken one is retried with backoff, named by an
// Event and counted by a metric; /healthz stays 200 (the node serves
// everything else); once the module can load, the retry programs it.
func TestMissingSchedulerModuleStaysWithItsService(t *testing.T) {
	const sched = "nq"
	mods, err := os.ReadFile("/proc/modules")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mods), "ip_vs_"+sched+" ") {
		t.Fatalf("ip_vs_%s is loaded already: the test needs it unloadable", sched)
	}
	// The kernel loads scheduler modules on demand through
	// kernel.modprobe: point it nowhere, and the module cannot load.
	orig, err := os.ReadFile("/proc/sys/kernel/modprobe")
	if err != nil {
		t.Fatal(err)
	}
	setModprobe := func(path string) {
		t.Helper()
		if err := os.WriteFile("/proc/sys/kernel/modprobe", []byte(path), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setModprobe("/nonexistent/modprobe")
	t.Cleanup(func() { setModprobe(strings.TrimSpace(string(orig))) })

	h := newHarness(t)
	broken := k8sService("broken", "10.96.20.2", map[string]string{policy.AnnotationScheduler: sched})
	l := newLoop(t, h, k8sNodeA(), k8sService("good", "10.96.20.1", nil), h.k8sSlice("good", "pod-a1"),
		broken, h.k8sSlice("broken", "pod-a2"))
	client := h.pod("pod-a3")
	if _, err := l.answeredBy(client, "10.96.20.1:80", "pod-a1", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	st := l.p.Stats()
	if st.Failures != 0 || st.FullSyncs != 1 {
		t.Errorf("after the first sync: %+v, want one full sync and no failed one", st)
	}
	select {
	case ev := <-l.events.Events:
		if !strings.Contains(ev, "Warning FailedToProgram") || !strings.Contains(ev, "10.96.20.2:80/TCP") ||
			!strings.Contains(ev, "no such file or directory") {
			t.Errorf("event %q, want a FailedToProgram Warning naming 10.96.20.2:80/TCP", ev)
		}
	case <-time.After(10 * time.Second):
		t.Error("no Event on the broken service")
	}
	if n := l.metric("kube_ipvs_proxy_service_sync_errors_total", "reason=KernelError"); n < 1 {
		t.Errorf("service_sync_errors_total{reason=KernelError} = %v, want ≥ 1", n)
	}
	if n := l.metric("kube_ipvs_proxy_failing_services", ""); n != 1 {
		t.Errorf("failing_services = %v, want 1", n)
	}
	if code := l.healthz(); code != http.StatusOK {
		t.Errorf("/healthz %d, want 200: the node serves everything else", code)
	}

	// The good service is updated incrementally meanwhile.
	_, err = l.client.DiscoveryV1().EndpointSlices("default").Update(context.Background(), h.k8sSlice("good", "pod-b1"), metav1.UpdateOptions{})
	h.must(err)
	if _, err := l.answeredBy(client, "10.96.20.1:80", "pod-b1", 10*time.Second); err != nil {
		t.Fatal(err)
	}

	// Retried with backoff: failures at growing intervals (1 s, 2 s, 4 s).
	var at []time.Duration
	start, seen := time.Now(), l.metric("kube_ipvs_proxy_service_sync_errors_total", "reason=KernelError")
	for time.Since(start) < 8*time.Second {
		if n := l.metric("kube_ipvs_proxy_service_sync_errors_total", "reason=KernelError"); n > seen {
			at, seen = append(at, time.Since(start)), n
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("retries after %v", at)
	if len(at) < 2 || len(at) > 4 {
		t.Errorf("%d retries in 8 s (%v), want 2-4 (backoff 1 s, 2 s, 4 s, ...)", len(at), at)
	} else if gap1, gap2 := at[1]-at[0], at[len(at)-1]-at[len(at)-2]; gap2 < gap1 || gap1 < 900*time.Millisecond {
		t.Errorf("retry gaps %v then %v: want growing, from about 1 s", gap1, gap2)
	}
	st = l.p.Stats()
	if st.FullSyncs != 1 || st.Failures != 0 {
		t.Errorf("after the retries: %d full syncs, %d failed syncs; want 1 and 0 (incremental only)", st.FullSyncs, st.Failures)
	}
	if code := l.healthz(); code != http.StatusOK {
		t.Errorf("/healthz %d after the retries, want 200", code)
	}
	select {
	case ev := <-l.events.Events:
		t.Errorf("a second Event for the same error: %q", ev)
	default:
	}

	// The module can load again: a retry programs the service.
	setModprobe(strings.TrimSpace(string(orig)))
	if _, err := l.answeredBy(client, "10.96.20.2:80", "pod-a2", 40*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := l.metric("kube_ipvs_proxy_failing_services", ""); n != 0 {
		t.Errorf("failing_services = %v after the recovery, want 0", n)
	}
}

// TestDeletedKernelObjectsRepairedAtOnce: with the periodic resync an
// hour away, deleting kube-ipvs0 (every ClusterIP becomes unreachable),
// one of our virtual servers or destinations, an address of kube-ipvs0
// or our nftables table, flushing the table's rules, or another program flushing one of
// its sets (the VIP filter then refuses the Service), is noticed by the
// loop's probe and repaired by a full resync: traffic is back within 2 s.
func TestDeletedKernelObjectsRepairedAtOnce(t *testing.T) {
	h := newHarness(t)
	l := newLoop(t, h, k8sNodeA(), k8sService("web", "10.96.21.1", nil), h.k8sSlice("web", "pod-b1"))
	client := h.pod("pod-a3")
	if _, err := l.answeredBy(client, "10.96.21.1:80", "pod-b1", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	linkBack := func() bool { _, err := netlink.LinkByName("kube-ipvs0"); return err == nil }
	tableBack := func() bool {
		c, err := nftables.New()
		if err != nil {
			return false
		}
		_, err = c.ListTableOfFamily(nft.TableName, nftables.TableFamilyINet)
		return err == nil
	}
	webVS := &ipvs.Service{Address: net.ParseIP("10.96.21.1").To4(), Protocol: unix.IPPROTO_TCP, Port: 80, AddressFamily: unix.AF_INET}
	vsBack := func() bool {
		h, err := ipvs.New("")
		if err != nil {
			return false
		}
		defer h.Close()
		_, err = h.GetService(webVS)
		return err == nil
	}
	destBack := func() bool {
		h, err := ipvs.New("")
		if err != nil {
			return false
		}
		defer h.Close()
		ds, err := h.GetDestinations(webVS)
		return err == nil && len(ds) == 1
	}
	addrBack := func() bool {
		link, err := netlink.LinkByName("kube-ipvs0")
		if err != nil {
			return false
		}
		as, err := netlink.AddrList(link, netlink.FAMILY_V4)
		return err == nil && slices.ContainsFunc(as, func(a netlink.Addr) bool { return a.IP.Equal(net.ParseIP("10.96.21.1")) })
	}
	rulesBack := func() bool {
		c, err := nftables.New()
		if err != nil {
			return false
		}
		t := &nftables.Table{Family: nftables.TableFamilyINet, Name: nft.TableName}
		rules, err := c.GetRules(t, &nftables.Chain{Name: "nat-prerouting", Table: t})
		return err == nil && len(rules) > 0
	}
	setBack := func() bool {
		c, err := nftables.New()
		if err != nil {
			return false
		}
		els, err := c.GetSetElements(&nftables.Set{Table: &nftables.Table{Family: nftables.TableFamilyINet, Name: nft.TableName}, Name: "service-ports-v4"})
		return err == nil && len(els) > 0
	}
	for _, tc := range []struct {
		what     string
		delete   func() error
		restored func() bool
	}{
		{"kube-ipvs0 deleted", func() error {
			link, err := netlink.LinkByName("kube-ipvs0")
			if err != nil {
				return err
			}
			return netlink.LinkDel(link)
		}, linkBack},
		{"table deleted", func() error {
			c, err := nftables.New()
			if err != nil {
				return err
			}
			c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: nft.TableName})
			return c.Flush()
		}, tableBack},
		{"one virtual server deleted", func() error {
			h, err := ipvs.New("")
			if err != nil {
				return err
			}
			defer h.Close()
			return h.DelService(webVS)
		}, vsBack},
		{"its one destination deleted", func() error {
			h, err := ipvs.New("")
			if err != nil {
				return err
			}
			defer h.Close()
			ds, err := h.GetDestinations(webVS)
			if err != nil || len(ds) != 1 {
				return fmt.Errorf("destinations of %s: %d, %v; want 1", webVS.Address, len(ds), err)
			}
			return h.DelDestination(webVS, ds[0])
		}, destBack},
		{"an address removed from kube-ipvs0", func() error {
			link, err := netlink.LinkByName("kube-ipvs0")
			if err != nil {
				return err
			}
			a, _ := netlink.ParseAddr("10.96.21.1/32")
			return netlink.AddrDel(link, a)
		}, addrBack},
		{"one set flushed by another process (nft flush set)", func() error {
			return labnet.AsAnotherProcess("nft", func() error {
				c, err := nftables.New()
				if err != nil {
					return err
				}
				c.FlushSet(&nftables.Set{Table: &nftables.Table{Family: nftables.TableFamilyINet, Name: nft.TableName}, Name: "service-ports-v4"})
				return c.Flush()
			})
		}, setBack},
		{"table's rules flushed (nft flush table)", func() error {
			c, err := nftables.New()
			if err != nil {
				return err
			}
			c.FlushTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: nft.TableName})
			return c.Flush()
		}, rulesBack},
	} {
		full := l.p.Stats().FullSyncs
		if err := tc.delete(); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		start := time.Now()
		for !tc.restored() && time.Since(start) < 10*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := l.answeredBy(client, "10.96.21.1:80", "pod-b1", 10*time.Second); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		took := time.Since(start)
		t.Logf("%s: restored and traffic back after %v", tc.what, took)
		if took > 2*time.Second {
			t.Errorf("%s: restored and traffic back after %v, want within 2 s", tc.what, took)
		}
		// The resync's bookkeeping ends after its kernel writes.
		deadline := time.Now().Add(2 * time.Second)
		for l.p.Stats().FullSyncs == full && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := l.p.Stats().FullSyncs; got != full+1 {
			t.Errorf("%s: %d full resyncs, want 1", tc.what, got-full)
		}
	}
}
