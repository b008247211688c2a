package proxier

import (
	"bytes"
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/google/nftables"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/fakeapi"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/retained"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// scaleService and scaleSlice are bench-scale's workload as API
// objects: the ith of n ClusterIP Services in ten namespaces, and its one
// EndpointSlice of 10 ready endpoints.
func scaleService(i int) corev1.Service {
	ip := fmt.Sprintf("10.100.%d.%d", byte(i>>8), byte(i))
	return corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%10), Name: fmt.Sprintf("svc-%d", i), ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}

func scaleSlice(i int) discoveryv1.EndpointSlice {
	name := fmt.Sprintf("svc-%d", i)
	s := discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%10), Name: name + "-abcde", ResourceVersion: "1",
			Labels: map[string]string{apiconv.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for j := range 10 {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 200+j, byte(i>>8), byte(i))},
			NodeName:   ptr.To(fmt.Sprintf("node-%d", j)),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// generatedClient is the fake API with n Services and their
// EndpointSlices made afresh at each list, as a decode makes them, and
// held nowhere else: the process's heap is then the proxy's alone. Its
// watches never send anything.
type generatedClient struct {
	kubeclient.Interface
	cs *fake.Clientset
	n  int
}

func newGeneratedClient(n int) generatedClient {
	cs := fake.NewClientset(node(testNode, "192.0.2.10", nil))
	return generatedClient{Interface: fakeapi.Client(cs), cs: cs, n: n}
}

func (g generatedClient) Services(func(*metav1.ListOptions)) cache.ListerWatcher {
	return g.listWatch(func() runtime.Object {
		l := &corev1.ServiceList{Items: make([]corev1.Service, g.n)}
		for i := range l.Items {
			l.Items[i] = scaleService(i)
		}
		return l
	}, g.cs.CoreV1().Services("").Watch)
}

func (g generatedClient) EndpointSlices(func(*metav1.ListOptions)) cache.ListerWatcher {
	return g.listWatch(func() runtime.Object {
		l := &discoveryv1.EndpointSliceList{Items: make([]discoveryv1.EndpointSlice, g.n)}
		for i := range l.Items {
			l.Items[i] = scaleSlice(i)
		}
		return l
	}, g.cs.DiscoveryV1().EndpointSlices("").Watch)
}

func (g generatedClient) listWatch(list func() runtime.Object,
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return list(), nil },
		WatchFuncWithContext: watchFn,
	}, g.cs)
}

// BenchmarkConvertedSlicesRetained10000 reports what the EndpointSlices
// informer's cache keeps for bench-scale's 10,000 slices of 10 endpoints
// ("retained-B"), each with a UID and a trigger time as the apiserver's
// EndpointSlice controller writes them, its strings made afresh as a
// decode makes them.
func BenchmarkConvertedSlicesRetained10000(b *testing.B) {
	in := make([]discoveryv1.EndpointSlice, 10000)
	for i := range in {
		in[i] = scaleSlice(i)
		in[i].UID = types.UID(fmt.Sprintf("7c9e6679-7425-40de-944b-%012d", i))
		in[i].Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-11-24T10:00:00Z"}
	}
	retained.Report(b, func() (any, error) {
		out := make([]*convertedSlice, len(in))
		for i := range in {
			s := in[i]
			s.Namespace, s.Name, s.UID = strings.Clone(s.Namespace), strings.Clone(s.Name), types.UID(strings.Clone(string(s.UID)))
			out[i] = newConvertedSlice(&s)
		}
		return out, nil
	})
}

// discardKernel and discardConn are empty kernels that accept every
// IPVS change and set element and keep none: on a node the table is the
// kernel's memory, not the proxy's.
type discardKernel struct{ ipvs.Kernel }

func (discardKernel) Write(ops []ipvs.Op) []error { return make([]error, len(ops)) }

type discardConn struct{ nft.Conn }

func (c discardConn) AddSet(s *nftables.Set, _ []nftables.SetElement) error {
	return c.Conn.AddSet(s, nil)
}
func (discardConn) SetAddElements(*nftables.Set, []nftables.SetElement) error { return nil }

// BenchmarkColdStartPeak10000 reports the most heap the proxy holds at
// once at 10,000 services x 10 endpoints: from its start until its
// first sync starts (the informers' lists and caches, the engine;
// "list-peak-live-B") and through that sync ("sync-peak-live-B"), and
// what is live once it is done ("settled-live-B"), with
// both writers over kernels that keep nothing (discardKernel,
// discardConn). The fake
// API lists every object at once, where the apiserver streams them
// (client-go's watch-list), so the first figure is above a node's. With
// KIP_PEAK_HEAP_PROFILE=file it writes there the heap profile taken
// nearest the sync's peak.
func BenchmarkColdStartPeak10000(b *testing.B) { benchColdStartPeak(b, 10000) }

// BenchmarkColdStartPeak1000 is the same at 1,000 services, where what a
// cold start holds whatever the table's size (a Write's worth of IPVS
// changes, the packages' own) is a large share of the peak.
func BenchmarkColdStartPeak1000(b *testing.B) { benchColdStartPeak(b, 1000) }

func benchColdStartPeak(b *testing.B, services int) {
	var most [2]uint64
	var settled uint64
	var prof []byte
	path := os.Getenv("KIP_PEAK_HEAP_PROFILE")
	if path != "" {
		defer func(rate int) { goruntime.MemProfileRate = rate }(goruntime.MemProfileRate)
		goruntime.MemProfileRate = 4096 // a sample every 4 KiB, not 512: MiB figures per line
	}
	for b.Loop() {
		r := coldStart(b, coldStartOpts{services: services, gcPercent: 2, profile: true})
		settled = max(settled, r.settled)
		most[0] = max(most[0], r.live[0])
		if r.live[1] > most[1] {
			most[1], prof = r.live[1], r.profile
		}
	}
	b.ReportMetric(float64(most[0]), "list-peak-live-B")
	b.ReportMetric(float64(most[1]), "sync-peak-live-B")
	b.ReportMetric(float64(settled), "settled-live-B")
	if path != "" {
		if err := os.WriteFile(path, prof, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdStartHeap10000 is the same cold start with the collector
// as the proxy runs it (GOGC 100, and Config.ReleaseMemory's memory rule:
// "gogc-100-release-memory"), without the rule, under memory limits and
// at GOGC 50 and 25 throughout: the most heap it held, free room
// included, before the first sync and in it ("list-peak-heap-B",
// "sync-peak-heap-B": what of the peak RSS is the heap), the largest goal
// the collector set ("peak-goal-B") and the collector's CPU time over the
// start ("gc-cpu-s").
func BenchmarkColdStartHeap10000(b *testing.B) {
	for _, tc := range []struct {
		gcPercent int
		limit     int64
		release   bool
	}{{100, 0, true}, {100, 0, false}, {100, 120 << 20, false}, {100, 100 << 20, false}, {100, 80 << 20, false},
		{50, 0, false}, {25, 0, false}} {
		name := fmt.Sprintf("gogc-%d", tc.gcPercent)
		if tc.limit > 0 {
			name += fmt.Sprintf("-limit-%dMiB", tc.limit>>20)
		}
		if tc.release {
			name += "-release-memory"
		}
		b.Run(name, func(b *testing.B) {
			var heap [2]uint64
			var goal uint64
			var gcCPU float64
			for b.Loop() {
				r := coldStart(b, coldStartOpts{gcPercent: tc.gcPercent, limit: tc.limit, release: tc.release})
				heap[0], heap[1], goal = max(heap[0], r.heap[0]), max(heap[1], r.heap[1]), max(goal, r.goal)
				gcCPU += r.gcCPU
			}
			b.ReportMetric(float64(heap[0]), "list-peak-heap-B")
			b.ReportMetric(float64(heap[1]), "sync-peak-heap-B")
			b.ReportMetric(float64(goal), "peak-goal-B")
			b.ReportMetric(gcCPU/float64(b.N), "gc-cpu-s")
		})
	}
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(path string) error {
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 0); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

type coldStartOpts struct {
	services  int
	gcPercent int
	limit     int64 // debug.SetMemoryLimit's, 0 for none
	release   bool  // Config.ReleaseMemory
	profile   bool
}

type coldStartResult struct {
	live    [2]uint64 // the most live bytes before the first sync and in it, over the start's
	heap    [2]uint64 // the most heap held, free room included, before the first sync and in it
	goal    uint64    // the collector's largest goal
	gcCPU   float64   // seconds
	settled uint64    // the live heap once the first sync is done, over the start's
	profile []byte    // nearest the sync's live peak
}

var coldStartMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/gc/heap/goal:bytes",
	"/cpu/classes/gc/total:cpu-seconds",
	"/gc/heap/live:bytes",
}

// coldStart runs one proxy over newGeneratedClient(o.services, 10,000
// when 0) until its first sync ends, sampling the heap every 200µs: the
// live heap is what the last collection marked (with gcPercent 2 the
// collector runs almost continuously, so that it is close to the
// moment's), and (profile) a heap profile is taken whenever the sync's
// peak grew by a MiB.
func coldStart(b *testing.B, o coldStartOpts) coldStartResult {
	b.Helper()
	dp := newDataPlane(nft.New(nft.Config{}, discardConn{nft.NewFake()}),
		ipvs.New(ipvs.Config{}, discardKernel{ipvs.NewFakeKernel()}, ipvs.NewFakeLinks(), ipvs.NewFakeSysctls()))
	seams := newFakeSeams()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	services := o.services
	if services == 0 {
		services = 10000
	}
	p, err := New(Config{NodeName: testNode, Client: newGeneratedClient(services), MetadataClient: metadatafake.NewSimpleMetadataClient(scheme),
		DataPlane: dp, Observer: seams, Health: seams, ServiceHealth: seams, SyncPeriod: time.Hour,
		ReleaseMemory: o.release})
	if err != nil {
		b.Fatal(err)
	}
	goruntime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(o.gcPercent))
	if o.limit > 0 {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(o.limit))
	}
	s := make([]metrics.Sample, len(coldStartMetrics))
	for i, name := range coldStartMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	before, gcBefore := s[5].Value.Uint64(), s[4].Value.Float64()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var r coldStartResult
	var profiled uint64
	var prof bytes.Buffer
	for p.Stats().Syncs < 1 {
		i := 0
		if seams.get("SyncStarted") > 0 {
			i = 1
		}
		metrics.Read(s)
		live := s[5].Value.Uint64()
		r.heap[i] = max(r.heap[i], s[0].Value.Uint64()+s[1].Value.Uint64()+s[2].Value.Uint64())
		r.goal = max(r.goal, s[3].Value.Uint64())
		if live > r.live[i] {
			r.live[i] = live
			if o.profile && i == 1 && live > profiled+1<<20 {
				profiled = live
				prof.Reset()
				if err := pprof.Lookup("heap").WriteTo(&prof, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
	metrics.Read(s)
	r.gcCPU = s[4].Value.Float64() - gcBefore
	goruntime.GC()
	metrics.Read(s)
	r.settled = max(s[5].Value.Uint64(), before) - before
	if path := os.Getenv("KIP_SETTLED_HEAP_PROFILE"); o.profile && path != "" {
		goruntime.GC() // a heap profile is as of the collection before the last
		if err := writeHeapProfile(path); err != nil {
			b.Fatal(err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	for i := range r.live {
		r.live[i] = max(r.live[i], before) - before
	}
	r.profile = prof.Bytes()
	return r
}
