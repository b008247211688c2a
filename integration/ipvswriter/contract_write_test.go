//go:build integration

package ipvswriter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// write is one Kernel.Write of the changes of steps (built by addVS,
// addDest, ...), in their order. It observes each change's errno,
// consecutive equal ones counted ("ok EEXIST ok×3").
func write(steps ...step) step {
	ops := make([]ipvs.Op, len(steps))
	names := make([]string, len(steps))
	for i, s := range steps {
		ops[i], names[i] = *s.op, s.name
	}
	name := "Write [" + strings.Join(names, "; ") + "]"
	if len(steps) > 12 {
		name = fmt.Sprintf("Write [%d changes: %s; ...]", len(steps), strings.Join(names[:3], "; "))
	}
	return step{name: name, do: func(s seams) (string, error) { return errClasses(s.k.Write(ops)), nil }}
}

// errClasses renders errors by errClass, runs of equal ones counted.
func errClasses(errs []error) string {
	var out []string
	for i := 0; i < len(errs); {
		c, j := errClass(errs[i]), i+1
		for j < len(errs) && errClass(errs[j]) == c {
			j++
		}
		if j-i > 1 {
			c = fmt.Sprintf("%s×%d", c, j-i)
		}
		out = append(out, c)
		i = j
	}
	return strings.Join(out, " ")
}

// manyDests returns n destination adds to the virtual server spec, of
// distinct addresses 10.245.x.y:80.
func manyDests(spec string, n int) []step {
	out := make([]step, n)
	for i := range n {
		d := ipvs.Destination{Addr: netip.AddrFrom4([4]byte{10, 245, byte(i >> 8), byte(i)}), Port: 80, Weight: 1}
		out[i] = addDest(spec, d)
	}
	return out
}

// writeCases send batches with failures in them: the kernel processes
// the changes of one Write in order, each on its own, so a failure in the
// middle is that change's alone.
func writeCases() []contractCase {
	const missing = "10.96.0.99:80/TCP"
	big := append(append([]step{addVS(virt(vip4, "rr", 0, 0))}, manyDests(vip4, 3000)...), manyDests(missing, 3000)...)
	big = append(big, manyDests(vip4, 3000)...)
	return []contractCase{
		{"a write: a duplicate destination in the middle fails alone, the changes before and after it stand", []step{
			write(addVS(virt(vip4, "rr", 0, 0)), addDest(vip4, pod1), addDest(vip4, pod1), addDest(vip4, pod2),
				addVS(virt(vip6, "rr", 0, 0)), addDest(vip6, pod61)),
		}},
		{"a write: a destination of a missing virtual server in the middle is ESRCH alone", []step{
			write(addVS(virt(vip4, "rr", 0, 0)), addDest(vip4, pod1), addDest(missing, pod2), addDest(vip4, pod2),
				updateDest(vip4, weighted(pod1, 5))),
		}},
		{"a write: a virtual server refused fails its destinations after it (ESRCH); the next virtual server stands", []step{
			write(addVS(virt(vip4, "nope", 0, 0)), addDest(vip4, pod1), addDest(vip4, pod2),
				addVS(virt(vip6, "wrr", ipvs.FlagPersistent, 60)), addDest(vip6, pod61)),
		}},
		{"a write is made in order: each change sees what the ones before it made", []step{
			write(addVS(virt(vip4, "rr", 0, 0)), addDest(vip4, pod1), addDest(vip4, pod2),
				updateVS(virt(vip4, "sh", ipvs.FlagSched1|ipvs.FlagSched2, 0)), updateDest(vip4, weighted(pod1, 0)),
				deleteDest(vip4, pod2), deleteDest(vip4, pod2), updateDest(vip4, pod3),
				deleteVS(vip4), addDest(vip4, pod1), addVS(virt(vip4, "rr", 0, 0)), addDest(vip4, pod3), updateVS(virt(vip4, "nope", 0, 0))),
		}},
		{"a write of nothing changes nothing", []step{write()}},
		{"a write larger than one system call: every change made, every failure answered", []step{write(big...)}},
	}
}

// TestKernelContractInOneWrite runs the contract's cases (and the
// write cases) with each run of consecutive IPVS change steps sent in one
// Kernel.Write, on the fakes (one change after the other) and on the
// kernel (the Linux adapter's batches), and requires the same errno for
// every change and the same state after every Write.
func TestKernelContractInOneWrite(t *testing.T) {
	labnet.LinkUp(t, "lo")
	unloadSchedulersAfter(t)
	kern := linuxSeams(t)
	orig, err := kern.k.Timeouts()
	if err != nil {
		t.Fatalf("Timeouts: %v", err)
	}
	arp, err := kern.sys.Read(sysctl.Path(arpKey))
	if err != nil {
		t.Fatalf("Get %s: %v", arpKey, err)
	}
	t.Cleanup(func() {
		_ = kern.k.SetTimeouts(orig)
		_ = kern.sys.Write(sysctl.Path(arpKey), arp)
		_ = kern.l.DeleteLink(longName)
	})
	for _, tc := range append(contractCases(), writeCases()...) {
		t.Run(tc.name, func(t *testing.T) {
			clean(t)
			if err := kern.k.SetTimeouts(defaultTimeouts); err != nil {
				t.Fatalf("reset timeouts: %v", err)
			}
			fake := fakeSeams()
			for i, s := range batched(tc.steps) {
				at := fmt.Sprintf("step %d (%s)", i+1, s.name)
				fo, ferr := s.do(fake)
				ko, kerr := s.do(kern)
				t.Logf("%s: kernel %s %s", at, errClass(kerr), ko)
				if f, k := errClass(ferr), errClass(kerr); f != k {
					t.Errorf("%s: fake %s (%v), kernel %s (%v)", at, f, ferr, k, kerr)
				}
				if fo != ko {
					t.Errorf("%s: fake saw %q, kernel %q", at, fo, ko)
				}
				if f, k := render(fake), render(kern); f != k {
					t.Errorf("%s: state differs:\nfake:\n%s\nkernel:\n%s", at, f, k)
				}
			}
		})
	}
}

// batched replaces each run of consecutive IPVS change steps by one
// write of them, and drops skipped steps.
func batched(steps []step) []step {
	var out, run []step
	flush := func() {
		if len(run) > 0 {
			out = append(out, write(run...))
			run = nil
		}
	}
	for _, s := range steps {
		switch {
		case s.skip != "":
		case s.op != nil:
			run = append(run, s)
		default:
			flush()
			out = append(out, s)
		}
	}
	flush()
	return out
}
