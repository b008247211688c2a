package kubeclient

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is what the proxy asks of the API server. Each list watcher
// lists and watches every namespace's objects, with the list options
// modify sets (nil: none).
type Interface interface {
	Services(modify func(*metav1.ListOptions)) cache.ListerWatcher
	EndpointSlices(modify func(*metav1.ListOptions)) cache.ListerWatcher
	Nodes(modify func(*metav1.ListOptions)) cache.ListerWatcher
	// Node reads one Node.
	Node(ctx context.Context, name string) (*corev1.Node, error)
	// EventSink writes Events, each in its own namespace.
	EventSink() record.EventSink
}

// Scheme holds the types the proxy reads and writes: core/v1 and
// discovery/v1. An event recorder resolves the objects it is given
// through it.
var Scheme = runtime.NewScheme()

var codecs = serializer.NewCodecFactory(Scheme)

func init() {
	utilruntime.Must(corev1.AddToScheme(Scheme))
	utilruntime.Must(discoveryv1.AddToScheme(Scheme))
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
}

// Client is Interface over the API server cfg names.
type Client struct {
	core, discovery rest.Interface
}

var _ Interface = (*Client)(nil)

// New returns a Client for cfg. Like client-go's Clientset, both API
// groups share one HTTP client and, when cfg sets QPS and no rate
// limiter, one rate limiter.
func New(cfg *rest.Config) (*Client, error) {
	c := *cfg
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	httpClient, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	core, err := groupClient(c, httpClient, "/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	discovery, err := groupClient(c, httpClient, "/apis", discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Client{core: core, discovery: discovery}, nil
}

// groupClient is a REST client for one API group version, configured as
// the typed clients configure theirs (setConfigDefaults).
func groupClient(c rest.Config, httpClient *http.Client, apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
	c.GroupVersion, c.APIPath = &gv, apiPath
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, codecs).WithoutConversion()
	rc, err := rest.RESTClientForConfigAndClient(&c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("%s client: %w", gv, err)
	}
	return rc, nil
}

func (c *Client) Services(modify func(*metav1.ListOptions)) cache.ListerWatcher {
	return listWatch(c.core, "services", modify)
}

func (c *Client) EndpointSlices(modify func(*metav1.ListOptions)) cache.ListerWatcher {
	return listWatch(c.discovery, "endpointslices", modify)
}

func (c *Client) Nodes(modify func(*metav1.ListOptions)) cache.ListerWatcher {
	return listWatch(c.core, "nodes", modify)
}

func (c *Client) Node(ctx context.Context, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	err := c.core.Get().Resource("nodes").Name(name).VersionedParams(&metav1.GetOptions{}, metav1.ParameterCodec).
		Do(ctx).Into(n)
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (c *Client) EventSink() record.EventSink { return eventSink{c.core} }

// listWatch lists and watches resource in every namespace. Without the
// fake clientset's marker, the informer may use watch-list semantics,
// as over a typed client.
func listWatch(c rest.Interface, resource string, modify func(*metav1.ListOptions)) cache.ListerWatcher {
	if modify == nil {
		modify = func(*metav1.ListOptions) {}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			modify(&o)
			return request(c, resource, &o).Do(ctx).Get()
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			modify(&o)
			return request(c, resource, &o).Watch(ctx)
		},
	}
}

// request is a list or watch of resource with options o; like a typed
// client's, its HTTP timeout is the options' timeout.
func request(c rest.Interface, resource string, o *metav1.ListOptions) *rest.Request {
	r := c.Get().Resource(resource).VersionedParams(o, metav1.ParameterCodec)
	if o.TimeoutSeconds != nil {
		r = r.Timeout(time.Duration(*o.TimeoutSeconds) * time.Second)
	}
	return r
}

// eventSink writes Events in their own namespace, as client-go's
// EventSinkImpl over Events("") does.
type eventSink struct{ c rest.Interface }

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.c.Post().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").
		Body(e).Do(context.Background()).Into(out)
	return out, err
}

func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.c.Put().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Name(e.Name).
		Body(e).Do(context.Background()).Into(out)
	return out, err
}

func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.c.Patch(types.StrategicMergePatchType).NamespaceIfScoped(e.Namespace, e.Namespace != "").
		Resource("events").Name(e.Name).Body(data).Do(context.Background()).Into(out)
	return out, err
}
