package proxier

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeapi"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// interner is shared by every informer's transform, so that a node or
// zone name, a namespace or a port name is one string in the process
// (kubeapi.Interner), and an endpoint's node and zone one policy.Place.
// Its objects are read-only, as any informer's.
var interner = kubeapi.NewInterner()

// convertedSlice is an EndpointSlice as the EndpointSlices informer's
// cache holds it: its identity, resource version, conversion and trigger
// time. The engine keeps the converted slice; the API object is dropped
// once converted, so the endpoints are held once, not twice.
type convertedSlice struct {
	identity
	conv       *policy.EndpointSlice
	err        error
	trigger    time.Time
	hasTrigger bool
	// bad is an unparsable trigger time and why; nil for most slices.
	bad *badTrigger
}

// badTrigger is an EndpointSlice's unparsable trigger time annotation.
type badTrigger struct {
	value string
	err   error
}

// newConvertedSlice converts s (trimmed first, so that its strings are
// interned) with kubeapi.EndpointSliceInterned, so that its endpoints
// share their Places with every other slice's.
func newConvertedSlice(s *discoveryv1.EndpointSlice) *convertedSlice {
	s = interner.TrimEndpointSlice(s)
	conv, err := kubeapi.EndpointSliceInterned(s, interner)
	out := &convertedSlice{identity: identityOf(&s.ObjectMeta), conv: conv, err: err}
	if v, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
		tt, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			out.bad = &badTrigger{value: v, err: err}
		} else {
			out.trigger, out.hasTrigger = tt, true
		}
	}
	return out
}

// serviceConv is how Services are converted: proxyName is
// --service-proxy-name (kubeapi.Service); dropExternalIPs leaves
// spec.externalIPs out, as kube-proxy does with the feature gate
// AllowServiceExternalIPs=false.
type serviceConv struct {
	proxyName       string
	dropExternalIPs bool
}

// convertedService is a Service as the Services informer's cache holds
// it: its identity and its conversion (for --service-proxy-name).
type convertedService struct {
	identity
	conv *policy.Service
	err  error
}

func newConvertedService(svc *corev1.Service, c serviceConv) *convertedService {
	svc = interner.TrimService(svc)
	conv, err := kubeapi.Service(svc, c.proxyName)
	if conv != nil && c.dropExternalIPs {
		conv.ExternalIPs = nil
	}
	return &convertedService{identity: identityOf(&svc.ObjectMeta), conv: conv, err: err}
}

// serviceConv is how the proxy converts Services.
func (p *Proxier) serviceConv() serviceConv {
	return serviceConv{proxyName: p.cfg.ServiceProxyName, dropExternalIPs: p.cfg.DropExternalIPs}
}

// ref is the Service an Event names.
func (c *convertedService) ref() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name, UID: c.uid,
		ResourceVersion: c.resourceVersion}}
}

// transform is the informers' transform: Services and EndpointSlices are
// held converted, other objects trimmed.
func (p *Proxier) transform(obj any) (any, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		return newConvertedService(svc, p.serviceConv()), nil
	}
	return trimObject(obj)
}

// trimObject is every informer's transform: it keeps of each object only
// what the converters and the loop read (kubeapi.Interner's Trim
// functions: our annotations, the labels we select on, the fields the
// engine uses, identity), so the caches do not hold what kubectl and the
// controllers wrote besides. It runs once on each freshly decoded object
// (client-go's contract) and returns a new object; it never modifies its
// argument, and it is idempotent. Objects of another type only lose their
// managed fields.
func trimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return interner.TrimService(o), nil
	case *discoveryv1.EndpointSlice:
		return newConvertedSlice(o), nil
	case *convertedSlice, *convertedService:
		return o, nil
	case *corev1.Node:
		return interner.TrimNode(o), nil
	case *metav1.PartialObjectMetadata:
		return interner.TrimNodeMetadata(o), nil
	}
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}
