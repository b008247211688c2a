package proxier

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// informerSet is the always-on informers: Services, EndpointSlices and
// every Node (this node's whole, the others' addresses: nodeaddrs.go).
type informerSet struct {
	informers []cache.SharedIndexInformer
	synced    []cache.InformerSynced
	wg        sync.WaitGroup
}

// Unlike kube-proxy's, the Services and EndpointSlices informers select
// nothing out: Services of another proxy (service-proxy-name) and
// headless ones, and their EndpointSlices, are watched too. They are not
// served (apiconv.Service says so), but the engine keeps their
// ClusterIPs from other Services' external IPs and NOTRACK from their
// endpoints, which tracked traffic reaches (policy/unmanaged.go). With
// --service-proxy-name, the Services not labelled with it are another
// proxy's.

// newInformers builds the informers and registers the handlers. They
// start with start.
func (p *Proxier) newInformers() (*informerSet, error) {
	c := p.cfg.Client
	set := &informerSet{}
	for _, h := range []struct {
		lw      cache.ListerWatcher
		obj     runtime.Object
		handler cache.ResourceEventHandler
	}{
		{c.Services(func(*metav1.ListOptions) {}), &corev1.Service{}, p.serviceHandler()},
		{c.EndpointSlices(func(*metav1.ListOptions) {}), &discoveryv1.EndpointSlice{}, p.sliceHandler()},
		{c.Nodes(func(*metav1.ListOptions) {}), &corev1.Node{}, p.nodeHandler()},
	} {
		// No indexers: nothing here reads an index, and a namespace
		// index would keep a set of keys per namespace and an entry
		// per object.
		inf := cache.NewSharedIndexInformerWithOptions(h.lw, h.obj,
			cache.SharedIndexInformerOptions{ResyncPeriod: p.cfg.ConfigSyncPeriod, Indexers: cache.Indexers{}})
		if err := inf.SetTransform(p.transform); err != nil {
			return nil, fmt.Errorf("set the %T informer's transform: %w", h.obj, err)
		}
		reg, err := inf.AddEventHandler(h.handler)
		if err != nil {
			return nil, fmt.Errorf("register event handler: %w", err)
		}
		set.informers = append(set.informers, inf)
		set.synced = append(set.synced, reg.HasSynced)
	}
	return set, nil
}

func (s *informerSet) start(ctx context.Context) {
	for _, inf := range s.informers {
		s.wg.Go(func() { inf.RunWithContext(ctx) })
	}
}

// shutdown waits for the informers' goroutines; ctx must be done.
func (s *informerSet) shutdown() { s.wg.Wait() }

// objectOf returns obj as a T, unwrapping a delete tombstone.
func objectOf[T any](obj any) (T, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

// unchanged reports an informer resync: the same resource version again.
func unchanged(old, cur metav1.Object) bool {
	return old.GetResourceVersion() != "" && old.GetResourceVersion() == cur.GetResourceVersion()
}

func (p *Proxier) serviceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if svc, ok := objectOf[*convertedService](obj); ok {
				p.onConvertedService(svc)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := objectOf[*convertedService](old)
			svc, ok2 := objectOf[*convertedService](obj)
			if ok1 && ok2 && !unchanged(o, svc) {
				p.onConvertedService(svc)
			}
		},
		DeleteFunc: func(obj any) {
			if svc, ok := objectOf[*convertedService](obj); ok {
				p.onServiceDelete(svc.namespace, svc.name)
			}
		},
	}
}

func (p *Proxier) onConvertedService(svc *convertedService) {
	c := p.t.applyService(svc)
	if !c.invalid { // an ignored object changes nothing, not even warnings
		p.events.warn(p.logger(), svc.ref(), c.warnings)
	}
	p.serviceChanged(c)
}

func (p *Proxier) onServiceDelete(namespace, name string) {
	p.events.forget(serviceKey(namespace, name))
	p.serviceChanged(p.t.deleteService(namespace, name))
}

// serviceChanged reports a Service change and starts or stops the node
// metadata informer as topology-keys services come and go.
func (p *Proxier) serviceChanged(c change) {
	p.queued(c)
	p.nodes.set(c.topology)
}

// sliceHandler applies the EndpointSlices informer's converted slices
// (its transform converts them: transform, below).
func (p *Proxier) sliceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := objectOf[*convertedSlice](obj); ok {
				p.queued(p.t.applySlice(s))
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := objectOf[*convertedSlice](old)
			s, ok2 := objectOf[*convertedSlice](obj)
			if ok1 && ok2 && !unchanged(o, s) {
				p.queued(p.t.applySlice(s))
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := objectOf[*convertedSlice](obj); ok {
				p.queued(p.t.deleteSlice(s.namespace, s.name))
			}
		},
	}
}

// nodeHandler applies the Nodes informer's objects: this node's Node
// (trimmed), the others' addresses (otherNode).
func (p *Proxier) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := objectOf[*corev1.Node](obj); ok {
				p.onNode(n)
			}
			p.onOtherNode(nil, obj)
		},
		UpdateFunc: func(old, obj any) {
			if n, ok := objectOf[*corev1.Node](obj); ok {
				p.onNode(n)
			}
			p.onOtherNode(old, obj)
		},
		DeleteFunc: func(obj any) {
			if o, ok := objectOf[*otherNode](obj); ok {
				p.queued(p.t.setNodeAddresses(o.name, nil))
				return
			}
			n, ok := objectOf[*corev1.Node](obj)
			if !ok || n.Name != p.cfg.NodeName {
				return
			}
			// A deleted Node is going away: health reports it as such
			// even if the last version seen had no deletion timestamp.
			gone := n.DeepCopy()
			if gone.DeletionTimestamp == nil {
				now := metav1.NewTime(p.clock.Now())
				gone.DeletionTimestamp = &now
			}
			p.health.SyncNode(gone)
			p.queued(p.t.deleteSelf(n.Name))
		},
	}
}

func (p *Proxier) onNode(n *corev1.Node) {
	if n.Name != p.cfg.NodeName {
		return
	}
	p.health.SyncNode(n)
	p.queued(p.t.upsertSelf(n))
}

// interner is shared by every informer's transform, so that a node or
// zone name, a namespace or a port name is one string in the process
// (apiconv.Interner), and an endpoint's node and zone one policy.Place.
// Its objects are read-only, as any informer's.
var interner = apiconv.NewInterner()

// convertedSlice is an EndpointSlice as the EndpointSlices informer's
// cache holds it: its identity, resource version, conversion and trigger
// time. The engine keeps the converted slice; the API object is dropped
// once converted, so the endpoints are held once, not twice. One is kept
// per EndpointSlice of the cluster, so it is kept small: no UID (no Event
// names a slice), the trigger time in nanoseconds.
type convertedSlice struct {
	identity
	conv *policy.EndpointSlice
	err  error
	// trigger is the trigger time annotation's, in nanoseconds since the
	// epoch (minTrigger to maxTrigger); 0 without one.
	trigger int64
	// bad is an unparsable trigger time and why; nil for most slices.
	bad *badTrigger
}

// minTrigger and maxTrigger bound the trigger times a convertedSlice
// keeps: those time.Time.UnixNano gives.
var (
	minTrigger = time.Unix(0, 1)
	maxTrigger = time.Unix(0, math.MaxInt64)
)

// badTrigger is an EndpointSlice's unparsable trigger time annotation.
type badTrigger struct {
	value string
	err   error
}

// newConvertedSlice converts s (trimmed first, so that its strings are
// interned) with apiconv.EndpointSliceInterned, so that its endpoints
// share their Places with every other slice's.
func newConvertedSlice(s *discoveryv1.EndpointSlice) *convertedSlice {
	s = interner.TrimEndpointSlice(s)
	conv, err := apiconv.EndpointSliceInterned(s, interner)
	out := &convertedSlice{identity: identityOf(&s.ObjectMeta), conv: conv, err: err}
	if v, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
		tt, err := time.Parse(time.RFC3339Nano, v)
		switch {
		case err != nil:
			out.bad = &badTrigger{value: v, err: err}
		case tt.Before(minTrigger) || tt.After(maxTrigger):
			out.bad = &badTrigger{value: v, err: fmt.Errorf("not between %s and %s", minTrigger.Format(time.RFC3339), maxTrigger.Format(time.RFC3339))}
		default:
			out.trigger = tt.UnixNano()
		}
	}
	return out
}

// serviceConv is how Services are converted: proxyName is
// --service-proxy-name (apiconv.Service); dropExternalIPs leaves
// spec.externalIPs out, as kube-proxy does with the feature gate
// AllowServiceExternalIPs=false.
type serviceConv struct {
	proxyName       string
	dropExternalIPs bool
}

// convertedService is a Service as the Services informer's cache holds
// it: its identity, its UID (which the Events that name it carry) and its
// conversion (for --service-proxy-name).
type convertedService struct {
	identity
	uid  types.UID
	conv *policy.Service
	err  error
	// held are the ClusterIPs of a Service not served (err set), which
	// it still holds (apiconv.HeldClusterIPs).
	held []netip.Addr
}

func newConvertedService(svc *corev1.Service, c serviceConv) *convertedService {
	svc = interner.TrimService(svc)
	conv, err := apiconv.Service(svc, c.proxyName)
	if conv != nil && c.dropExternalIPs {
		apiconv.DropExternalIPs(conv)
	}
	out := &convertedService{identity: identityOf(&svc.ObjectMeta), uid: svc.UID, conv: conv, err: err}
	if err != nil {
		out.held = apiconv.HeldClusterIPs(svc)
	}
	return out
}

// serviceConv is how the proxy converts Services.
func (p *Proxier) serviceConv() serviceConv {
	return serviceConv{proxyName: p.cfg.ServiceProxyName, dropExternalIPs: p.cfg.DropExternalIPs}
}

// GetUID and SetUID are the Service's UID, which identity does not keep.
func (c *convertedService) GetUID() types.UID    { return c.uid }
func (c *convertedService) SetUID(uid types.UID) { c.uid = uid }

// ref is the Service an Event names.
func (c *convertedService) ref() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name, UID: c.uid,
		ResourceVersion: c.resourceVersion}}
}

// transform is the informers' transform: Services, EndpointSlices and
// other nodes' Nodes are held converted, other objects trimmed.
func (p *Proxier) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return newConvertedService(o, p.serviceConv()), nil
	case *corev1.Node:
		if o.Name != p.cfg.NodeName {
			return newOtherNode(o), nil
		}
	}
	return trimObject(obj)
}

// trimObject is every informer's transform: it keeps of each object only
// what the converters and the loop read (apiconv.Interner's Trim
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
	case *convertedSlice, *convertedService, *otherNode:
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
