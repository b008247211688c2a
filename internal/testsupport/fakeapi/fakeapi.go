package fakeapi

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
)

// Client is cs as a kubeclient.Interface.
func Client(cs kubernetes.Interface) kubeclient.Interface { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

func (c clientset) Services(modify func(*metav1.ListOptions)) cache.ListerWatcher {
	s := c.cs.CoreV1().Services("")
	return listWatch(c.cs, modify, s.List, s.Watch)
}

func (c clientset) EndpointSlices(modify func(*metav1.ListOptions)) cache.ListerWatcher {
	s := c.cs.DiscoveryV1().EndpointSlices("")
	return listWatch(c.cs, modify, s.List, s.Watch)
}

func (c clientset) Nodes(modify func(*metav1.ListOptions)) cache.ListerWatcher {
	n := c.cs.CoreV1().Nodes()
	return listWatch(c.cs, modify, n.List, n.Watch)
}

func (c clientset) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func (c clientset) EventSink() record.EventSink {
	return &typedcorev1.EventSinkImpl{Interface: c.cs.CoreV1().Events("")}
}

// listWatch is a typed client's list and watch, with the fake
// clientset's watch-list marker passed on as client-go's informers pass
// it.
func listWatch[L runtime.Object](cs kubernetes.Interface, modify func(*metav1.ListOptions),
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	if modify == nil {
		modify = func(*metav1.ListOptions) {}
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			modify(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			modify(&o)
			return watchFn(ctx, o)
		},
	}, cs)
}
