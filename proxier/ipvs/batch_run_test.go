package ipvs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/golden"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/plantest"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// three are services a, b and c, one virtual server each with three
// destinations, which one sync adds in one Write: b's in the middle.
func three() []policy.ServicePlan {
	var out []policy.ServicePlan
	for i, name := range []string{"a", "b", "c"} {
		n := i + 1
		out = append(out, svc(name, vs(fmt.Sprintf("ClusterIP 10.96.0.%d:80/TCP", n),
			fmt.Sprintf("10.244.%d.1:80", n), fmt.Sprintf("10.244.%d.2:80", n), fmt.Sprintf("10.244.%d.3:80", n))))
	}
	return out
}

// TestOneWritePerPhase: a sync hands the kernel its IPVS changes in one
// Write per phase (add, update, prune), in that order, not one request
// per change.
func TestOneWritePerPhase(t *testing.T) {
	before := svc("web", vs("ClusterIP 10.96.0.1:80/TCP", "10.244.1.1:80", "10.244.1.2:80*2"),
		vs("ClusterIP 10.96.0.1:53/UDP", "10.244.1.1:53", "10.244.1.2:53"))
	for _, tc := range []struct {
		name       string
		change     policy.ServicePlan
		wantWrites int
		wantTrace  string
	}{
		{"nothing changed, nothing written", before, 0, ""},
		{"adds only: one write", svc("web", vs("ClusterIP 10.96.0.1:80/TCP", "10.244.1.1:80", "10.244.1.2:80*2", "10.244.1.3:80"),
			vs("ClusterIP 10.96.0.1:53/UDP", "10.244.1.1:53", "10.244.1.2:53"), vs("ClusterIP 10.96.0.1:443/TCP", "10.244.1.1:443")), 1,
			"add-destination 10.96.0.1:80/TCP 10.244.1.3:80\nadd-service 10.96.0.1:443/TCP\nadd-destination 10.96.0.1:443/TCP 10.244.1.1:443"},
		{"add, update and prune: three writes, in that order", svc("web", vs("ClusterIP 10.96.0.1:80/TCP", "10.244.1.1:80", "10.244.1.2:80", "10.244.1.3:80"),
			vs("ClusterIP 10.96.0.1:53/UDP", "10.244.1.1:53")), 3,
			"add-destination 10.96.0.1:80/TCP 10.244.1.3:80\nupdate-destination 10.96.0.1:80/TCP 10.244.1.2:80\n" +
				"delete-destination 10.96.0.1:53/UDP 10.244.1.2:53"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustApply(before)
			if got := e.k.Writes(); got != 1 {
				t.Errorf("the first sync made %d writes, want 1", got)
			}
			n := e.k.Writes()
			e.mustApply(tc.change)
			if got := e.k.Writes() - n; got != tc.wantWrites {
				t.Errorf("%d writes, want %d", got, tc.wantWrites)
			}
			if got := strings.Join(e.trace, "\n"); got != tc.wantTrace {
				t.Errorf("changes:\n%s\nwant:\n%s", got, tc.wantTrace)
			}
		})
	}
}

// TestFailureInTheMiddleOfAWrite: a change that fails in the middle of a
// Write is its virtual server's service's failure alone: the changes
// before and after it stand, the error names the change and wraps the
// kernel's errno, and the service is retried with backoff. The changes
// of its virtual server that fail because of it (the destinations of a
// virtual server the kernel refused) are not reported again. An answer
// lost altogether is the whole data plane's.
func TestFailureInTheMiddleOfAWrite(t *testing.T) {
	for _, tc := range []struct {
		name, op, target string
		fault            error
		wantErr          string
		wantErrors       int // Ops()["error"]: every change the kernel refused
		wantPlane        bool
	}{
		{"a virtual server refused: its destinations fail after it, reported once, as its service's",
			"add-service", "10.96.0.2:80/TCP", syscall.ENOENT,
			"add virtual server 10.96.0.2:80/TCP: no such file or directory", 4, false},
		{"a duplicate destination: the destinations before and after it stand",
			"add-destination", "10.96.0.2:80/TCP 10.244.2.2:80", syscall.EEXIST,
			"add destination 10.244.2.2:80 of virtual server 10.96.0.2:80/TCP: file exists", 1, false},
		{"a lost answer asks for a resync",
			"add-destination", "10.96.0.2:80/TCP 10.244.2.2:80", fmt.Errorf("%w: netlink receive: %w", ErrUnanswered, syscall.ENOBUFS),
			"add destination 10.244.2.2:80 of virtual server 10.96.0.2:80/TCP: the kernel's answer was lost: netlink receive: no buffer space available", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.fault(tc.op, tc.target, tc.fault)
			err := e.resync(plan(three()...))
			if err == nil || err.Error() != tc.wantErr || !errors.Is(err, tc.fault) {
				t.Fatalf("Resync error %q, want %q wrapping %v", err, tc.wantErr, tc.fault)
			}
			if got := e.k.Writes(); got != 1 {
				t.Errorf("%d writes, want 1: the failure must not split the batch", got)
			}
			if got := e.w.Ops()["error"]; got != tc.wantErrors {
				t.Errorf("Ops()[error] = %d, want %d", got, tc.wantErrors)
			}
			svcErrs, rest := SplitErrors(err)
			if tc.wantPlane {
				if rest == nil || len(svcErrs) != 0 || !e.w.NeedsResync() {
					t.Errorf("SplitErrors: %v, rest %v, NeedsResync %v; want the whole data plane's", svcErrs, rest, e.w.NeedsResync())
				}
			} else if len(svcErrs) != 1 || svcErrs[0].Service.Name != "b" || rest != nil || e.w.NeedsResync() {
				t.Errorf("SplitErrors: %v, rest %v, NeedsResync %v; want one error of default/b", svcErrs, rest, e.w.NeedsResync())
			}
			name := strings.Fields(tc.name)[1]
			golden.Check(t, "testdata/write-middle-"+name+".golden", e.k.Dump())
			// Retried once the fault is gone: only b's missing changes.
			e.fault("", "", nil)
			e.advance(time.Second)
			if tc.wantPlane {
				e.mustResync(plan(three()...))
			} else {
				e.mustApply()
			}
			full := newEnv(t, Config{})
			full.mustResync(plan(three()...))
			if got, want := e.k.Dump(), full.k.Dump(); got != want {
				t.Errorf("after the retry:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestLargePhaseWrittenInChunks: a phase larger than writeChunk (a cold
// start's adds) goes to the kernel in Writes of at most writeChunk
// changes, in order; a virtual server refused in one chunk is its
// service's failure alone, and its destinations in a later chunk are not
// sent at all. The refused one is the virtual server whose destinations
// straddle the first chunk's end.
func TestLargePhaseWrittenInChunks(t *testing.T) {
	plan := scalePlan(1000) // 1,000 virtual servers and 10,000 destinations: several chunks of adds
	// A virtual server and its 10 destinations are 11 adds; if the first
	// chunk would end at one's edge, the first virtual server keeps 7.
	if writeChunk%11 <= 1 {
		plan.VirtualServers[0].Destinations = plan.VirtualServers[0].Destinations[:7]
	}
	dests := 0
	for _, vs := range plan.VirtualServers {
		dests += len(vs.Destinations)
	}
	var order []string // the adds, as a first Resync makes them
	first := newEnv(t, Config{})
	first.k.Fault = func(op, target string) error {
		if op == "add-service" || op == "add-destination" {
			order = append(order, op+" "+target)
		}
		return nil
	}
	first.mustResync(plan)
	var bad string
	inFirst := 0 // its destinations in the first chunk
	for i := min(writeChunk, len(order)) - 1; i >= 0 && bad == ""; i-- {
		if vs, ok := strings.CutPrefix(order[i], "add-service "); ok {
			bad, inFirst = vs, writeChunk-1-i
		}
	}
	if inFirst == 0 || inFirst >= 10 {
		t.Fatalf("no virtual server straddles the first chunk's end (%q, %d)", bad, inFirst)
	}

	e := newEnv(t, Config{})
	badDests := 0
	e.k.Fault = func(op, target string) error {
		switch {
		case op == "add-service" && target == bad:
			return syscall.EINVAL
		case op == "add-destination" && strings.HasPrefix(target, bad+" "):
			badDests++
		}
		return nil
	}
	err := e.w.Resync(plan)
	var se *ServiceError
	if !errors.As(err, &se) || e.w.NeedsResync() {
		t.Fatalf("Resync: %v, NeedsResync %v; want one service's failure alone", err, e.w.NeedsResync())
	}
	if got, want := e.k.Writes(), (len(order)+writeChunk-1)/writeChunk; got != want {
		t.Errorf("%d writes, want %d", got, want)
	}
	if got, want := strings.Count(e.k.Dump(), "\n  -> "), dests-10; got != want {
		t.Errorf("%d destinations in the kernel, want %d", got, want)
	}
	if badDests != inFirst {
		t.Errorf("%d destinations of the refused virtual server sent, want the %d in its chunk", badDests, inFirst)
	}
}

// TestAddsRunAsEachWriteFills: once its adds stream, a batch runs a
// Write's worth of them as soon as they are planned, after every bind,
// so that planning a cold start's table holds at most one Write of its
// changes, and the mirror of each virtual server the Writes completed
// shares its desired destinations; the kernel ends as the same batch
// leaves it unstreamed, its changes in the same order.
func TestAddsRunAsEachWriteFills(t *testing.T) {
	plan := scalePlan(1000) // 11,000 adds: full Writes planned, a partial one left
	batchOf := func(e *env) *batch {
		if err := e.w.start(true); err != nil {
			t.Fatal(err)
		}
		b := e.w.newBatch(e.now)
		for _, sp := range plantest.Groups(plan) {
			b.service(sp.Service, sp.VirtualServers)
		}
		return b
	}
	want := newEnv(t, Config{})
	wb := batchOf(want)
	wb.planAddresses()
	wb.planVirtualServers()
	wb.run()

	e := newEnv(t, Config{})
	b := batchOf(e)
	b.plan()
	if got := len(b.steps[phaseAdd]); got >= writeChunk {
		t.Errorf("%d adds held once planned, want fewer than a Write's %d", got, writeChunk)
	}
	if got, want := e.k.Writes(), 11000/writeChunk; got != want {
		t.Errorf("%d Writes while planning, want %d", got, want)
	}
	for k, a := range e.w.mirror {
		if len(a.dests) == len(e.w.desired[k].dests) && !a.shared {
			t.Errorf("%s, complete once its Write ran, keeps a copy of its destinations", k)
			break
		}
	}
	b.run()
	if len(b.errs) > 0 || len(wb.errs) > 0 {
		t.Fatal(b.errs, wb.errs)
	}
	if got, want := e.dump(), want.dump(); got != want {
		t.Errorf("kernel after the streamed batch:\n%s\nwant:\n%s", got, want)
	}
	if diff := cmp.Diff(want.trace, e.trace); diff != "" {
		t.Errorf("changes (-unstreamed +streamed):\n%s", diff)
	}
}

// TestAWritesWorthIsUnderHalfAMiB: what the executor holds for one
// Write, its planned steps and the changes sent with their answers, is
// under half a MiB, the same at any table size: in a small cluster's
// cold start, whose live heap is a few megabytes, a larger chunk is a
// large share of the peak.
func TestAWritesWorthIsUnderHalfAMiB(t *testing.T) {
	const limit = 512 << 10
	held := writeChunk * (unsafe.Sizeof(step{}) + unsafe.Sizeof(sent{}))
	if held >= limit {
		t.Errorf("a Write's worth holds %d bytes (%d changes of %d + %d), want under %d", held, writeChunk,
			unsafe.Sizeof(step{}), unsafe.Sizeof(sent{}), limit)
	}
}

// TestResyncBindsAsEachWriteFills: a Resync's binds run a Write's worth
// at a time as they are planned, so that planning a cold start's
// addresses holds fewer than a Write of binds; every bind still runs
// before the first IPVS change, and the kernel ends as a batch with its
// binds run in one go leaves it.
func TestResyncBindsAsEachWriteFills(t *testing.T) {
	plan := scalePlan(writeChunk + 1000) // a full Write of binds, and a partial one
	held := newEnv(t, Config{})
	if err := held.w.start(true); err != nil {
		t.Fatal(err)
	}
	b := held.w.newBatch(held.now)
	b.allVS = true
	for _, sp := range plantest.Groups(plan) {
		b.service(sp.Service, sp.VirtualServers)
	}
	b.planAddresses()
	if got := len(b.steps[phaseAddAddress]); got >= writeChunk {
		t.Errorf("%d binds held once planned, want fewer than a Write's %d", got, writeChunk)
	}
	if got := len(held.w.bound); got != writeChunk {
		t.Errorf("%d addresses bound while planning, want %d", got, writeChunk)
	}

	want := newEnv(t, Config{})
	if err := want.w.start(true); err != nil {
		t.Fatal(err)
	}
	wb := want.w.newBatch(want.now)
	for _, sp := range plantest.Groups(plan) {
		wb.service(sp.Service, sp.VirtualServers)
	}
	wb.plan()
	wb.run()
	e := newEnv(t, Config{})
	e.mustResync(plan)
	if len(wb.errs) > 0 {
		t.Fatal(wb.errs)
	}
	binds, firstIPVS := 0, -1
	for i, c := range e.trace {
		switch {
		case strings.HasPrefix(c, "add-address "):
			binds++
			if firstIPVS >= 0 {
				t.Fatalf("bind %q after the first IPVS change %q", c, e.trace[firstIPVS])
			}
		case firstIPVS < 0 && strings.HasPrefix(c, "add-service "):
			firstIPVS = i
		}
	}
	if binds != len(plan.VirtualServers) {
		t.Errorf("%d binds, want %d", binds, len(plan.VirtualServers))
	}
	if got, want := e.dump(), want.dump(); got != want {
		t.Errorf("kernel after the Resync:\n%s\nwant:\n%s", got, want)
	}
}

// TestResyncJudgesOwnershipOnTheKernelItRead: a Resync decides which
// virtual servers are ours on the addresses bound when it read the
// kernel, not on those it binds while it runs: a virtual server on an
// address that a cold start binds for the first time is left alone,
// however far its adds have run by the time it is reached.
func TestResyncJudgesOwnershipOnTheKernelItRead(t *testing.T) {
	e := newEnv(t, Config{})
	other := key("10.100.3.200:8080/TCP") // on a planned virtual server's address (port 80), reached after the planned ones
	must(t, e.k.AddVirtualServer(VirtualServer{Key: other, Scheduler: "wlc"}))
	e.mustResync(scalePlan(1000))
	if !slices.ContainsFunc(kernelVSs(t, e), func(v VirtualServer) bool { return v.Key == other }) {
		t.Errorf("the cold start deleted %s, on an address it had not bound when it read the kernel", other)
	}
}
