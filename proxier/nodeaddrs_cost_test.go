package proxier

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// maxBytesPerOtherNode is what README's "Node addresses" promises for
// another node held for its addresses: the informer cache's entry and
// the engine's.
const maxBytesPerOtherNode = 768

// TestOtherNodeCostsAFewHundredBytes measures the heap one other Node
// costs, as the Nodes informer's cache and the engine hold it, over
// 5,000 Nodes shaped like a cloud's (a long name, an InternalIP, an
// ExternalIP, a hostname and a DNS name, fifty images, conditions).
func TestOtherNodeCostsAFewHundredBytes(t *testing.T) {
	const n = 5000
	full := make([]*corev1.Node, n)
	for i := range full {
		full[i] = cloudNode(i)
	}
	e, err := policy.New(policy.Config{NodeName: testNode})
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	before := heapInUse()
	for _, f := range full {
		o := newOtherNode(f)
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
		e.SetNodeAddresses(o.name, o.addrs)
	}
	after := heapInUse()
	runtime.KeepAlive(full) // the API objects, freed once converted, are not counted
	per := (after - before) / n
	t.Logf("%d other Nodes: %d bytes each (informer cache and engine), %d KiB in all", n, per, (after-before)/1024)
	if per > maxBytesPerOtherNode {
		t.Errorf("another Node costs %d bytes, over %d", per, maxBytesPerOtherNode)
	}
	runtime.KeepAlive(store)
	runtime.KeepAlive(e)
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// cloudNode is a Node as a cloud's kubelet reports it.
func cloudNode(i int) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", i/65536, i/256%256, i%256),
		ResourceVersion: fmt.Sprint(1000000 + i), UID: "3f0c2a9e-8c1b-4d0e-9a57-6b1f2c3d4e5f",
		Labels: map[string]string{"kubernetes.io/hostname": "x", "topology.kubernetes.io/zone": "eu-west-1a"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)},
			{Type: corev1.NodeExternalIP, Address: fmt.Sprintf("34.%d.%d.%d", i/65536, i/256%256, i%256)},
			{Type: corev1.NodeHostName, Address: "ip-10-0-0-1.eu-west-1.compute.internal"},
			{Type: corev1.NodeInternalDNS, Address: "ip-10-0-0-1.eu-west-1.compute.internal"},
		}}}
	for j := range 50 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.example.com/team/image-%d@sha256:%064d", j, j)}, SizeBytes: 1 << 26})
	}
	return n
}
