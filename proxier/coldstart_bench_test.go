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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/fakeapi"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// scaleObjects is bench-scale's workload as API objects: n ClusterIP
// Services in ten namespaces, each with one EndpointSlice of 10 ready
// endpoints, and this node.
func scaleObjects(n int) []runtime.Object {
	objs := []runtime.Object{node(testNode, "192.0.2.10", nil)}
	for i := range n {
		ns, name := fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("svc-%d", i)
		ip := fmt.Sprintf("10.100.%d.%d", byte(i>>8), byte(i))
		objs = append(objs, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		})
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abcde", ResourceVersion: "1",
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
		objs = append(objs, s)
	}
	return objs
}

// BenchmarkColdStartPeak10000 reports the most heap the proxy holds at
// once at 10,000 services x 10 endpoints, over what the fake API's own
// store holds before: from its start until its first sync starts (the
// informers' lists and caches, the engine; "list-peak-live-B") and
// through that sync ("sync-peak-live-B"), with both writers over their
// fakes, whose tables are part of it. The fake API lists every object at
// once, where the apiserver streams them (client-go's watch-list), so
// the first figure is above a node's. With KIP_PEAK_HEAP_PROFILE=file it
// writes there the heap profile taken nearest the sync's peak.
func BenchmarkColdStartPeak10000(b *testing.B) {
	objs := scaleObjects(10000)
	var most [2]uint64
	var prof []byte
	for b.Loop() {
		m, pr := coldStartPeak(b, objs)
		most[0] = max(most[0], m[0])
		if m[1] > most[1] {
			most[1], prof = m[1], pr
		}
	}
	b.ReportMetric(float64(most[0]), "list-peak-live-B")
	b.ReportMetric(float64(most[1]), "sync-peak-live-B")
	if path := os.Getenv("KIP_PEAK_HEAP_PROFILE"); path != "" {
		if err := os.WriteFile(path, prof, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// coldStartPeak runs one proxy until its first sync ends and returns the
// heap's most live bytes before and in that sync, with the collector
// almost continuous (GOGC 2) so that the heap's objects are close to the
// live ones, and a heap profile taken whenever the sync's peak grew by a
// MiB.
func coldStartPeak(b *testing.B, objs []runtime.Object) ([2]uint64, []byte) {
	b.Helper()
	client := fake.NewClientset(objs...)
	dp := newDataPlane(nft.New(nft.Config{}, nft.NewFake()),
		ipvs.New(ipvs.Config{}, ipvs.NewFakeKernel(), ipvs.NewFakeLinks(), ipvs.NewFakeSysctls()))
	seams := newFakeSeams()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	p, err := New(Config{NodeName: testNode, Client: fakeapi.Client(client), MetadataClient: metadatafake.NewSimpleMetadataClient(scheme),
		DataPlane: dp, Observer: seams, Health: seams, ServiceHealth: seams, SyncPeriod: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	goruntime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(2))
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(s); return s[0].Value.Uint64() }
	before := read()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var most [2]uint64
	var profiled uint64
	var prof bytes.Buffer
	for p.Stats().Syncs < 1 {
		i := 0
		if seams.get("SyncStarted") > 0 {
			i = 1
		}
		if h := read(); h > most[i] {
			most[i] = h
			if i == 1 && h > profiled+1<<20 {
				profiled = h
				prof.Reset()
				if err := pprof.Lookup("heap").WriteTo(&prof, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	for i := range most {
		most[i] = max(most[i], before) - before
	}
	return most, prof.Bytes()
}
