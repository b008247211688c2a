//go:build integration

package ipvswriter

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestFailureInTheMiddleOfABatchIsItsService: on the kernel, a change
// that fails in the middle of a sync's batch is its service's failure
// alone, with the kernel's errno: the changes before and after it in the
// same batch stand. The batch holds services a, b and c in that order.
func TestFailureInTheMiddleOfABatchIsItsService(t *testing.T) {
	// a and c have n destinations.
	three := func(n int, bDests ...string) []policy.ServicePlan {
		ac := func(i int) []string {
			return []string{fmt.Sprintf("10.244.%d.1:80", i), fmt.Sprintf("10.244.%d.2:80", i)}[:n]
		}
		return []policy.ServicePlan{
			svc("a", vs("ClusterIP 10.96.0.1:80/TCP", ac(1)...)),
			svc("b", vs("ClusterIP 10.96.0.2:80/TCP", bDests...)),
			svc("c", vs("ClusterIP 10.96.0.3:80/TCP", ac(3)...)),
		}
	}
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, h *mobyipvs.Handle, w *ipvs.Writer) // before the batch
		plans   []policy.ServicePlan
		wantErr string
		errno   unix.Errno
		wantB   string // b's virtual server and destinations after the batch
	}{
		{"a virtual server the kernel refuses (unknown scheduler): its destinations fail after it, one error",
			func(*testing.T, *mobyipvs.Handle, *ipvs.Writer) {},
			withScheduler(three(2, "10.244.2.1:80", "10.244.2.2:80"), "b", "nope"),
			"add virtual server 10.96.0.2:80/TCP: no such file or directory", unix.ENOENT, ""},
		{"a destination that exists behind the Writer's back (EEXIST) in the middle: the others stand",
			func(t *testing.T, h *mobyipvs.Handle, w *ipvs.Writer) {
				if err := w.Apply(three(1, "10.244.2.1:80")); err != nil {
					t.Fatalf("Apply: %v", err)
				}
				d := &mobyipvs.Destination{Address: netip.MustParseAddr("10.244.2.2").AsSlice(), Port: 80, Weight: 1, AddressFamily: unix.AF_INET}
				if err := h.NewDestination(mobyService("10.96.0.2", 80, unix.IPPROTO_TCP), d); err != nil {
					t.Fatal(err)
				}
			},
			three(2, "10.244.2.1:80", "10.244.2.2:80", "10.244.2.3:80"), // a and c gain one each
			"add destination 10.244.2.2:80 of virtual server 10.96.0.2:80/TCP: file exists", unix.EEXIST,
			"TCP 10.96.0.2:80 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2\n  -> 10.244.2.1:80 fwd=0 weight=1\n  -> 10.244.2.2:80 fwd=0 weight=1\n  -> 10.244.2.3:80 fwd=0 weight=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean(t)
			w := newWriter(t, ipvs.Config{})
			tc.prepare(t, h, w)
			err := w.Apply(tc.plans)
			if err == nil || err.Error() != tc.wantErr || !errors.Is(err, tc.errno) {
				t.Fatalf("Apply error %q, want %q wrapping %v", err, tc.wantErr, tc.errno)
			}
			svcErrs, rest := ipvs.SplitErrors(err)
			if len(svcErrs) != 1 || svcErrs[0].Service.Name != "b" || rest != nil || w.NeedsResync() {
				t.Errorf("SplitErrors: %v, rest %v, NeedsResync %v; want one error of default/b", svcErrs, rest, w.NeedsResync())
			}
			if f := w.Failing(); len(f) != 1 || f[0].Name != "b" {
				t.Errorf("Failing() = %v, want [default/b]", f)
			}
			want := "TCP 10.96.0.1:80 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2\n  -> 10.244.1.1:80 fwd=0 weight=1\n  -> 10.244.1.2:80 fwd=0 weight=1\n"
			if tc.wantB != "" {
				want += tc.wantB + "\n"
			}
			want += "TCP 10.96.0.3:80 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2\n  -> 10.244.3.1:80 fwd=0 weight=1\n  -> 10.244.3.2:80 fwd=0 weight=1"
			if got := dumpIPVS(t, h); got != want {
				t.Errorf("kernel after the batch:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// withScheduler sets service name's virtual servers' scheduler.
func withScheduler(sps []policy.ServicePlan, name, sched string) []policy.ServicePlan {
	for _, sp := range sps {
		if sp.Service.Name == name {
			for i := range sp.VirtualServers {
				sp.VirtualServers[i].Scheduler = sched
			}
		}
	}
	return sps
}

// perOpKernel is the kernel adapter with Write made one request per
// change (ipvs.WriteEach), as the Writer wrote before batches.
type perOpKernel struct{ ipvs.Kernel }

func (p perOpKernel) Write(ops []ipvs.Op) []error { return ipvs.WriteEach(p.Kernel, ops) }

// TestBatchedWriteCost measures writing N virtual servers × 10
// destinations into an empty IPVS, one request per change (ipvs.WriteEach)
// against batched (Kernel.Write): the changes alone, and a fresh
// Writer's first Resync (which also binds N addresses to kube-ipvs0,
// one rtnetlink request each, in both). N is each of KIP_BATCH_SERVICES
// (comma-separated; default 200, to keep make integration quick).
//
// Each measurement runs in a network namespace of its own: IPVS keeps
// deleted destinations in a per-namespace trash until a timer frees them,
// and walks the trash on every destination add, so in one namespace a
// measurement after another's flush pays for the trash, not for its
// writes. The namespaces are flushed after their measurement but kept
// until the end, so that none is torn down while another is measured.
func TestBatchedWriteCost(t *testing.T) {
	sizes := []int{200}
	if s := os.Getenv("KIP_BATCH_SERVICES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 || n > 65000 {
				t.Fatalf("KIP_BATCH_SERVICES=%q: want numbers from 1 to 65000", s)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		p := scalePlan(n, 10)
		ops := planOps(p)
		timeWrite := func(write func(k ipvs.Kernel, ops []ipvs.Op) []error) time.Duration {
			ns := freshIPVS(t)
			start := time.Now()
			errs := write(ns.k, ops)
			d := time.Since(start)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("%s: %v", ops[i], err)
				}
			}
			ns.check(t, n)
			return d
		}
		perOp := timeWrite(ipvs.WriteEach)
		batched := timeWrite(ipvs.Kernel.Write)
		timeResync := func(perOpWrites bool) time.Duration {
			ns := freshIPVS(t)
			k := ns.k
			if perOpWrites {
				k = perOpKernel{k}
			}
			w := ipvs.New(ipvs.Config{}, k, ns.l, ns.sys)
			start := time.Now()
			if err := w.Resync(p); err != nil {
				t.Fatalf("Resync: %v", err)
			}
			d := time.Since(start)
			ns.check(t, n)
			return d
		}
		resyncPerOp := timeResync(true)
		resyncBatched := timeResync(false)
		t.Logf("RESULT ipvs-write n=%d changes=%d per-op=%v batched=%v per-op/batched=%.1f; first Resync per-op=%v batched=%v per-op/batched=%.1f",
			n, len(ops), perOp.Round(time.Millisecond), batched.Round(time.Millisecond), float64(perOp)/float64(batched),
			resyncPerOp.Round(time.Millisecond), resyncBatched.Round(time.Millisecond), float64(resyncPerOp)/float64(resyncBatched))
	}
}

// ipvsNamespace is a fresh network namespace (lo up) with the Linux
// adapters' sockets, and a moby handle to check and flush, in it.
type ipvsNamespace struct {
	k   ipvs.Kernel
	l   ipvs.Links
	sys sysctl.Files
	h   *mobyipvs.Handle
}

// freshIPVS makes an ipvsNamespace, flushed and released when t ends.
func freshIPVS(t *testing.T) *ipvsNamespace {
	t.Helper()
	host, err := labnet.NewHost("ipvs-bench")
	if err != nil {
		t.Fatal(err)
	}
	ns := &ipvsNamespace{}
	var closeKernel func()
	err = host.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		// IPVS refuses IPv4 destinations in a namespace without a local
		// routing table (EINVAL), which lo up brings.
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		if ns.k, ns.l, ns.sys, closeKernel, err = ipvs.NewLinuxAdapters(); err != nil {
			return err
		}
		ns.h, err = mobyipvs.New("")
		return err
	})
	if err != nil {
		host.Close()
		t.Fatalf("IPVS in a fresh namespace: %v", err)
	}
	t.Cleanup(func() {
		ns.h.Close()
		closeKernel()
		host.Close()
	})
	return ns
}

// check requires n virtual servers with 10 destinations each, then
// flushes them.
func (ns *ipvsNamespace) check(t *testing.T, n int) {
	t.Helper()
	if svcs, dests := countIPVS(t, ns.h); svcs != n || dests != 10*n {
		t.Fatalf("kernel holds %d virtual servers, %d destinations; want %d, %d", svcs, dests, n, 10*n)
	}
	if err := ns.h.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// planOps is the changes that program plan into an empty IPVS, in the
// Writer's order: each virtual server, then its destinations.
func planOps(p policy.Plan) []ipvs.Op {
	var ops []ipvs.Op
	for _, v := range p.VirtualServers {
		k := ipvs.Key{Address: v.Address, Protocol: v.Protocol, Port: v.Port}
		ops = append(ops, ipvs.Op{Kind: ipvs.OpAddService, VS: ipvs.VirtualServer{Key: k, Scheduler: v.Scheduler}})
		for _, d := range v.Destinations {
			ops = append(ops, ipvs.Op{Kind: ipvs.OpAddDestination, VS: ipvs.VirtualServer{Key: k},
				Dest: ipvs.Destination{Addr: d.Address, Port: d.Port, Weight: d.Weight, Forward: ipvs.ForwardMasq}})
		}
	}
	return ops
}

// countIPVS counts the kernel's virtual servers and destinations.
func countIPVS(t *testing.T, h *mobyipvs.Handle) (svcs, dests int) {
	t.Helper()
	ss, err := h.GetServices()
	if err != nil {
		t.Fatalf("GetServices: %v", err)
	}
	for _, s := range ss {
		ds, err := h.GetDestinations(s)
		if err != nil {
			t.Fatalf("GetDestinations: %v", err)
		}
		dests += len(ds)
	}
	return len(ss), dests
}
