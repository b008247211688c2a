package proxier

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

var nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// nodeMetadata lists and watches every Node's metadata, as client-go's
// metadatainformer does (which would link client-go's informers for
// every API group; internal/kubeclient says why not). The metadata
// client's marker, if it has one, says whether watch-list semantics
// apply.
func nodeMetadata(c metadata.Interface) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.Resource(nodesResource).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Resource(nodesResource).Watch(ctx, o)
		},
	}, c)
}

// nodeWatch runs a metadata-only (PartialObjectMetadata) informer over
// every Node, for their labels, only while some service uses the
// topology-keys annotation: on a large cluster every node watching every
// Node costs the apiserver, so the cost is paid only when asked for.
//
// Each start is a new informer and a new tracker generation; a stopped
// informer's late events are dropped by the tracker.
//
// Restarting means listing every Node again, on every node of the
// cluster, so the informer lingers: it stops only once no service has
// needed it for linger. Toggling the annotation (a namespace editor can)
// then starts it once, and starts are at most one per linger.
type nodeWatch struct {
	mu      sync.Mutex
	client  metadata.Interface
	resync  time.Duration
	t       *tracker
	changed func(change) // reports an event's change (kicks the runner)
	parent  context.Context
	// linger is how long the informer outlives its last user; 0 stops
	// it at once.
	linger    time.Duration
	clock     clock.WithDelayedExecution
	stopTimer clock.Timer // the pending lingering stop, if any

	cancel  context.CancelFunc // nil: stopped
	synced  cache.InformerSynced
	wg      sync.WaitGroup // the informers' goroutines
	starts  int
	stopped int
}

// run enables starting: informers live under ctx.
func (w *nodeWatch) run(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.parent = ctx
}

// set starts the informer, or stops it once it has been unwanted for
// linger; it is a no-op when nothing changes or before run.
func (w *nodeWatch) set(want bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if want && w.stopTimer != nil { // wanted again while lingering
		w.stopTimer.Stop()
		w.stopTimer = nil
	}
	switch {
	case want && w.cancel == nil && w.parent != nil && w.parent.Err() == nil:
		w.startLocked()
	case !want && w.cancel != nil && w.linger <= 0:
		w.stopLocked()
	case !want && w.cancel != nil && w.stopTimer == nil:
		var t clock.Timer
		t = w.clock.AfterFunc(w.linger, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.stopTimer != t {
				return // cancelled, or superseded
			}
			w.stopTimer = nil
			if w.cancel != nil {
				w.stopLocked()
			}
		})
		w.stopTimer = t
	}
}

func (w *nodeWatch) startLocked() {
	gen := w.t.nodesStarted()
	logger := klog.FromContext(w.parent)
	inf := cache.NewSharedIndexInformer(nodeMetadata(w.client), &metav1.PartialObjectMetadata{}, w.resync, cache.Indexers{})
	var reg cache.ResourceEventHandlerRegistration
	err := inf.SetTransform(trimObject) // a node's identity and labels
	if err == nil {
		reg, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.upsert(gen, obj) },
			UpdateFunc: func(_, obj any) { w.upsert(gen, obj) },
			DeleteFunc: func(obj any) {
				if m, ok := objectOf[*metav1.PartialObjectMetadata](obj); ok {
					w.changed(w.t.deleteOther(gen, m.Name))
				}
			},
		})
	}
	if err != nil { // only when the informer was already started or stopped
		logger.Error(err, "Cannot watch node labels")
		w.changed(w.t.nodesStopped())
		return
	}
	ctx, cancel := context.WithCancel(w.parent)
	// The registration's HasSynced: our handler has seen the whole list.
	w.cancel, w.synced = cancel, reg.HasSynced
	w.starts++
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		inf.RunWithContext(ctx)
	}()
	go func() {
		defer w.wg.Done()
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			w.changed(w.t.nodesSyncedGen(gen))
		}
	}()
	logger.V(2).Info("Watching node labels for topology-keys services")
}

func (w *nodeWatch) stopLocked() {
	w.cancel()
	w.cancel, w.synced = nil, nil
	w.stopped++
	w.changed(w.t.nodesStopped())
	klog.FromContext(w.parent).V(2).Info("Stopped watching node labels: no topology-keys service left", "linger", w.linger)
}

func (w *nodeWatch) upsert(gen int, obj any) {
	if m, ok := objectOf[*metav1.PartialObjectMetadata](obj); ok {
		w.changed(w.t.upsertOther(gen, m.Name, m.Labels))
	}
}

// shutdown stops the informer and waits for every informer started to
// end; no informer starts afterwards.
func (w *nodeWatch) shutdown() {
	w.mu.Lock()
	if w.stopTimer != nil {
		w.stopTimer.Stop()
		w.stopTimer = nil
	}
	if w.cancel != nil {
		w.stopLocked()
	}
	w.parent = nil
	w.mu.Unlock()
	w.wg.Wait()
}

// waitSynced waits until the running informer, if any, has listed every
// node.
func (w *nodeWatch) waitSynced(ctx context.Context) bool {
	w.mu.Lock()
	synced := w.synced
	w.mu.Unlock()
	return synced == nil || cache.WaitForCacheSync(ctx.Done(), synced)
}

// state reports whether the informer runs, and how often it started and
// stopped.
func (w *nodeWatch) state() (running bool, starts, stops int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cancel != nil, w.starts, w.stopped
}
