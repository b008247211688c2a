package proxier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/fakeapi"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/udpflows"
)

const testNode = "node-a"

// fakeDataPlane records every call.
type fakeDataPlane struct {
	mu          sync.Mutex
	calls       []dpCall
	err         error // returned by the next calls
	needsResync bool
	failures    []ServiceFailure
	nextRetry   time.Time
	checkErr    error
	checks      int
	// failSetsResync: a failed Apply makes NeedsResync true, as the
	// real writers do.
	failSetsResync bool
	// ct, when set, is the conntrack table ReconcileConntrack
	// reconciles; ctCalls counts the calls.
	ct      *udpflows.FakeTable
	ctCalls int
	// onResync, if set, runs in each Resync.
	onResync func()
}

type dpCall struct {
	resync  bool
	repair  string               // "StartRepair" or "RepairStep" (repairingDataPlane)
	plan    policy.Plan          // Resync
	changes []policy.ServicePlan // Apply
}

// StartRepair: a fakeDataPlane does not repair in slices, so the
// periodic resync is a Resync.
func (f *fakeDataPlane) StartRepair() error { return ErrNoRepair }

func (f *fakeDataPlane) RepairStep(time.Duration, func() bool) (bool, error) {
	return true, ErrNoRepair
}

// repairingDataPlane is a fakeDataPlane that repairs in slices: a Repair is slices RepairSteps; onStep, if set, runs
// in each step (to queue a change during the repair), and stopAsked
// records what the step's stop said after it.
type repairingDataPlane struct {
	*fakeDataPlane
	slices    int
	left      int
	onStep    func(step int)
	stepErr   error // returned by the next RepairStep
	startErr  error
	stepsDone int
	stopAsked []bool
}

var (
	_ DataPlaneWriter = (*fakeDataPlane)(nil)
	_ DataPlaneWriter = (*repairingDataPlane)(nil)
)

func (f *repairingDataPlane) StartRepair() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, dpCall{repair: "StartRepair"})
	if f.startErr != nil {
		return f.startErr
	}
	f.left = f.slices
	return nil
}

func (f *repairingDataPlane) RepairStep(_ time.Duration, stop func() bool) (bool, error) {
	f.mu.Lock()
	f.calls = append(f.calls, dpCall{repair: "RepairStep"})
	f.left--
	f.stepsDone++
	step, left, err, hook := f.stepsDone, f.left, f.stepErr, f.onStep
	f.stepErr = nil
	if err != nil {
		f.needsResync = true
	}
	f.mu.Unlock()
	if hook != nil {
		hook(step)
	}
	asked := stop != nil && stop()
	f.mu.Lock()
	f.stopAsked = append(f.stopAsked, asked)
	f.mu.Unlock()
	return left <= 0 || err != nil, err
}

func (f *fakeDataPlane) Apply(changes []policy.ServicePlan) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, dpCall{changes: slices.Clone(changes)})
	if f.err != nil && f.failSetsResync {
		f.needsResync = true
	}
	return f.err
}

func (f *fakeDataPlane) Resync(plan policy.Plan) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, dpCall{resync: true, plan: plan})
	if f.onResync != nil {
		f.onResync()
	}
	return f.err
}

// LastResync reports fixed times, for the first sync's log line.
func (f *fakeDataPlane) LastResync() ResyncTimes {
	return ResyncTimes{NFTables: 3 * time.Millisecond, IPVS: 7 * time.Millisecond}
}

func (f *fakeDataPlane) NeedsResync() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.needsResync
}

// Faults: what the next calls report.
func (f *fakeDataPlane) ServiceFailures() []ServiceFailure {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.failures)
}

func (f *fakeDataPlane) Failing() []policy.ServiceKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []policy.ServiceKey
	for _, sf := range f.failures {
		out = append(out, sf.Service)
	}
	return out
}

func (f *fakeDataPlane) NextRetry() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nextRetry
}

func (f *fakeDataPlane) Check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	if f.checkErr != nil {
		f.needsResync = true
	}
	return f.checkErr
}

func (f *fakeDataPlane) setFaults(failures []ServiceFailure, nextRetry time.Time, checkErr error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures, f.nextRetry, f.checkErr = failures, nextRetry, checkErr
}

func (f *fakeDataPlane) IPVSOps() map[string]int { return map[string]int{"add_service/ok": 1} }
func (f *fakeDataPlane) Draining() int           { return 2 }

func (f *fakeDataPlane) ReconcileConntrack(rules policy.StaleUDPFlows) ([]udpflows.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctCalls++
	if f.ct == nil {
		return nil, nil
	}
	return udpflows.New(f.ct, clock.RealClock{}).Reconcile(rules)
}

func (f *fakeDataPlane) set(err error, needsResync bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.needsResync = err, needsResync
}

func (f *fakeDataPlane) snapshot() []dpCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// fakeSeams records the Observer, Health and ServiceHealth calls.
type fakeSeams struct {
	mu                sync.Mutex
	calls             map[string]int
	latencies         []time.Duration
	noLocal           map[string]int
	byKind            map[policy.Kind]int
	svcPending        int
	svcTotal, epTotal int
	hcPorts           map[policy.ServiceKey]uint16
	localReady        map[policy.ServiceKey]int
	nodes             []*corev1.Node
	failing           int
	ctDeleted         map[corev1.IPFamily]int // ConntrackReconciled's, summed
}

func newFakeSeams() *fakeSeams {
	return &fakeSeams{calls: map[string]int{}, noLocal: map[string]int{}, ctDeleted: map[corev1.IPFamily]int{}}
}

func (f *fakeSeams) count(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[name]++
}

func (f *fakeSeams) get(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeSeams) SyncStarted()                        { f.count("SyncStarted") }
func (f *fakeSeams) SyncDone(bool, time.Duration, error) { f.count("SyncDone") }
func (f *fakeSeams) Queued()                             { f.count("Queued") }
func (f *fakeSeams) ServiceChanges(pending, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.svcPending, f.svcTotal = pending, f.svcTotal+total
}
func (f *fakeSeams) EndpointChanges(_, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epTotal += total
}
func (f *fakeSeams) NetworkProgrammingLatency(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latencies = append(f.latencies, d)
}
func (f *fakeSeams) NoLocalEndpoints(tp string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noLocal[tp] = n
}
func (f *fakeSeams) VirtualServers(byKind map[policy.Kind]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byKind = byKind
}
func (f *fakeSeams) IPVSOps(map[string]int) { f.count("IPVSOps") }
func (f *fakeSeams) Draining(int)           { f.count("Draining") }
func (f *fakeSeams) ServiceFailure(reason string) {
	f.count("ServiceFailure/" + reason)
}
func (f *fakeSeams) FailingServices(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = n
}
func (f *fakeSeams) ConntrackReconciled(family corev1.IPFamily, _ time.Duration, deleted int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["ConntrackReconciled/"+string(family)]++
	f.ctDeleted[family] += deleted
}
func (f *fakeSeams) QueuedUpdate() { f.count("QueuedUpdate") }
func (f *fakeSeams) Updated()      { f.count("Updated") }
func (f *fakeSeams) SyncNode(n *corev1.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = append(f.nodes, n)
}
func (f *fakeSeams) SyncServices(ports map[policy.ServiceKey]uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hcPorts = ports
	f.calls["SyncServices"]++
	return nil
}
func (f *fakeSeams) SyncEndpoints(local map[policy.ServiceKey]int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.localReady = local
	f.calls["SyncEndpoints"]++
	return nil
}

// testProxier is a Proxier over fake clients and fake seams.
type testProxier struct {
	*Proxier
	client *fake.Clientset
	meta   *metadatafake.FakeMetadataClient
	dp     *fakeDataPlane
	seams  *fakeSeams
	rec    *record.FakeRecorder
}

func newTestProxier(t testing.TB, mutate func(*Config), objs ...runtime.Object) *testProxier {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tp := &testProxier{client: fake.NewClientset(objs...), meta: metadatafake.NewSimpleMetadataClient(scheme),
		dp: &fakeDataPlane{}, seams: newFakeSeams(), rec: record.NewFakeRecorder(100)}
	cfg := Config{NodeName: testNode, Client: fakeapi.Client(tp.client), MetadataClient: tp.meta, DataPlane: tp.dp,
		Observer: tp.seams, Health: tp.seams, ServiceHealth: tp.seams, Recorder: tp.rec, SyncPeriod: time.Hour}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tp.Proxier = p
	return tp
}

// start runs the proxier until the test ends and waits for its first
// sync.
func (tp *testProxier) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tp.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, "first sync", func() bool { return tp.Stats().Syncs >= 1 })
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until the loop has synced after the last event: a sync
// more than before.
func (tp *testProxier) syncedAfter(t *testing.T, before int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("sync #%d", before+1), func() bool { return tp.Stats().Syncs > before })
}

// Object builders.

func service(name, clusterIP string, mutate ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func annotated(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

// localLB makes an eTP=Local LoadBalancer with a health check node port.
func localLB(hcPort int32, ingress string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hcPort
		s.Spec.Ports[0].NodePort = 30090
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingress}}
	}
}

type ep struct{ addr, node string }

func slice(name, svc string, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: map[string]string{apiconv.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.addr}, NodeName: ptr.To(e.node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func withTrigger(s *discoveryv1.EndpointSlice, t time.Time) *discoveryv1.EndpointSlice {
	s = s.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[corev1.EndpointsLastChangeTriggerTime] = t.Format(time.RFC3339Nano)
	return s
}

func node(name, ip string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

func nodeMeta(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func key(name string) policy.ServiceKey { return policy.ServiceKey{Namespace: "default", Name: name} }

var errBoom = errors.New("boom")

// Conversions the informers' transform makes, for tests that hand the
// tracker and the handlers API objects.

// upsertService converts and applies a Service add or update.
func (t *tracker) upsertService(svc *corev1.Service) change {
	return t.applyService(newConvertedService(svc, t.conv))
}

// upsertSlice converts and applies an EndpointSlice add or update.
func (t *tracker) upsertSlice(s *discoveryv1.EndpointSlice) change {
	return t.applySlice(newConvertedSlice(s))
}

// onService converts svc and handles it as the Services informer does.
func (p *Proxier) onService(svc *corev1.Service) {
	p.onConvertedService(newConvertedService(svc, p.serviceConv()))
}
