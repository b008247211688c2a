//go:build integration

package ipvswriter

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// seams are the three kernel interfaces the Writer programs through: the
// fakes of proxier/ipvs, or the Linux adapters behind ipvs.NewLinux.
type seams struct {
	k   ipvs.Kernel
	l   ipvs.Links
	sys sysctl.Files
}

// fakeSeams are the fakes, their IPVS with the schedulers of the kernel
// the lab runs ("twos" from 6.2).
func fakeSeams() seams {
	release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return seams{ipvs.NewFakeKernelFor(string(release)), ipvs.NewFakeLinks(), ipvs.NewFakeSysctls()}
}

// linuxSeams returns the adapters ipvs.NewLinux wires into its Writer:
// the contract must hold for them, not for a copy of their translation
// code here.
func linuxSeams(t *testing.T) seams {
	t.Helper()
	k, l, sys, closeKernel, err := ipvs.NewLinuxAdapters()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeKernel)
	return seams{k, l, sys}
}

// step is one operation, run on the fake and on the kernel. It returns
// what it observed (a listing, a count; "" for a change) and its error.
type step struct {
	name string
	do   func(s seams) (string, error)
	// op is the IPVS change of a change step, which
	// TestKernelContractInOneWrite sends in a Kernel.Write with the
	// change steps around it.
	op *ipvs.Op
	// skip, when set, says why the fake cannot model the kernel here; the
	// step runs on neither, and the case must not depend on it.
	skip string
}

// skipped is s, not run, for the reason why.
func skipped(s step, why string) step {
	s.skip = why
	return s
}

// contractCase is a sequence of steps from an empty IPVS and no
// kube-ipvs0, compared after every step.
type contractCase struct {
	name  string
	steps []step
}

// defaultTimeouts are Linux's IPVS timeouts, which NewFakeKernel starts
// with; each case starts the kernel from them too.
var defaultTimeouts = ipvs.Timeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second, UDP: 300 * time.Second}

// TestKernelContract runs each case's operations against the fakes and
// the kernel and requires the same error class, the same observations and
// the same listed state after every step. Where they differ, the fake is
// wrong: the Writer's unit tests trust it to answer as the kernel does.
func TestKernelContract(t *testing.T) {
	// With no IPv4 address at all the kernel has no local routing table,
	// and IPVS refuses every IPv4 destination (EINVAL, from
	// inet_addr_type); a node always has lo up, so does the lab.
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
		_ = kern.l.DeleteLink(longName) // in case the kernel took the name
	})
	t.Run("the fake starts as the kernel boots", func(t *testing.T) {
		clean(t)
		if orig != defaultTimeouts {
			t.Skipf("an earlier test left the timeouts at %+v", orig)
		}
		if f, k := render(fakeSeams()), render(kern); f != k {
			t.Errorf("fresh state differs:\nfake:\n%s\nkernel:\n%s", f, k)
		}
	})
	for _, tc := range contractCases() {
		t.Run(tc.name, func(t *testing.T) {
			clean(t)
			if err := kern.k.SetTimeouts(defaultTimeouts); err != nil {
				t.Fatalf("reset timeouts: %v", err)
			}
			fake := fakeSeams()
			for i, s := range tc.steps {
				at := fmt.Sprintf("step %d (%s)", i+1, s.name)
				if s.skip != "" {
					t.Logf("%s skipped: %s", at, s.skip)
					continue
				}
				fo, ferr := s.do(fake)
				ko, kerr := s.do(kern)
				t.Logf("%s: kernel %s %s", at, errClass(kerr), ko) // the record a reader checks the table against
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

// errClass names an error by its errno, which is what the fakes promise;
// the wrapping text of the adapters (a *PathError, netlink's messages)
// is not part of the contract.
func errClass(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return "errno " + strconv.Itoa(int(errno))
	}
	return "not an errno: " + err.Error()
}

// render lists the state the steps can change: virtual servers (flags
// minus FlagHashed) with their destinations, both sorted since the kernel
// lists them in hash order, the timeouts, and kube-ipvs0 with its
// addresses. Link indexes are left out: the kernel's depend on every link
// made since boot.
func render(s seams) string {
	var b strings.Builder
	vss, err := s.k.VirtualServers()
	if err != nil {
		fmt.Fprintf(&b, "virtual servers: %s\n", errClass(err))
	}
	slices.SortFunc(vss, func(x, y ipvs.VirtualServer) int { return x.Key.Compare(y.Key) })
	for _, vs := range vss {
		vs.Flags &^= ipvs.FlagHashed
		fmt.Fprintf(&b, "%s\n%s", vs, dests(s, vs.Key))
	}
	to, err := s.k.Timeouts()
	fmt.Fprintf(&b, "timeouts tcp=%s tcpfin=%s udp=%s %s\n", to.TCP, to.TCPFin, to.UDP, errClass(err))
	info, err := s.l.Link(dummy)
	fmt.Fprintf(&b, "link %s %q %s\n", dummy, info.Kind, errClass(err))
	as, err := s.l.Addrs(dummy)
	slices.SortFunc(as, func(x, y netip.Prefix) int { return strings.Compare(x.String(), y.String()) })
	fmt.Fprintf(&b, "  addrs %v %s\n", as, errClass(err))
	return b.String()
}

// dests renders a virtual server's destinations, sorted, or the error.
func dests(s seams, k ipvs.Key) string {
	ds, err := s.k.Destinations(k)
	if err != nil {
		return "  destinations: " + errClass(err) + "\n"
	}
	slices.SortFunc(ds, func(x, y ipvs.Destination) int { return x.AddrPort().Compare(y.AddrPort()) })
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  -> %s weight=%d fwd=%d active=%d inactive=%d\n", d.AddrPort(), d.Weight, d.Forward, d.ActiveConns, d.InactiveConns)
	}
	return b.String()
}

// key parses "10.96.0.10:80/TCP" or "[fd00::10]:80/UDP".
func key(spec string) ipvs.Key {
	ap, proto, _ := strings.Cut(spec, "/")
	a := netip.MustParseAddrPort(ap)
	return ipvs.Key{Address: a.Addr(), Protocol: policy.Protocol(proto), Port: a.Port()}
}

// virt is a virtual server on spec (see key).
func virt(spec, sched string, flags, timeout uint32) ipvs.VirtualServer {
	return ipvs.VirtualServer{Key: key(spec), Scheduler: sched, Flags: flags, Timeout: timeout}
}

// dest is a NAT destination "10.244.1.5:8080" or "[fd00::5]:8080".
func dest(ap string, weight int32) ipvs.Destination {
	a := netip.MustParseAddrPort(ap)
	return ipvs.Destination{Addr: a.Addr(), Port: a.Port(), Weight: weight, Forward: ipvs.ForwardMasq}
}

// Step builders, one per operation; each names its step after the call.

func change(name string, f func(s seams) error) step {
	return step{name: name, do: func(s seams) (string, error) { return "", f(s) }}
}

// ipvsChange is a step of one IPVS change made alone, a Write of one
// (ipvs.WriteEach), carrying the change for TestKernelContractInOneWrite.
func ipvsChange(name string, o ipvs.Op) step {
	return step{name: name, op: &o, do: func(s seams) (string, error) { return "", ipvs.WriteEach(s.k, []ipvs.Op{o})[0] }}
}

func addVS(vs ipvs.VirtualServer) step {
	return ipvsChange("AddVirtualServer "+vs.String(), ipvs.Op{Kind: ipvs.OpAddService, VS: vs})
}

func updateVS(vs ipvs.VirtualServer) step {
	return ipvsChange("UpdateVirtualServer "+vs.String(), ipvs.Op{Kind: ipvs.OpUpdateService, VS: vs})
}

func deleteVS(spec string) step {
	return ipvsChange("DeleteVirtualServer "+spec, ipvs.Op{Kind: ipvs.OpDeleteService, VS: ipvs.VirtualServer{Key: key(spec)}})
}

func addDest(spec string, d ipvs.Destination) step {
	return ipvsChange(fmt.Sprintf("AddDestination %s %s weight=%d", spec, d.AddrPort(), d.Weight),
		ipvs.Op{Kind: ipvs.OpAddDestination, VS: ipvs.VirtualServer{Key: key(spec)}, Dest: d})
}

func updateDest(spec string, d ipvs.Destination) step {
	return ipvsChange(fmt.Sprintf("UpdateDestination %s %s weight=%d", spec, d.AddrPort(), d.Weight),
		ipvs.Op{Kind: ipvs.OpUpdateDestination, VS: ipvs.VirtualServer{Key: key(spec)}, Dest: d})
}

func deleteDest(spec string, d ipvs.Destination) step {
	return ipvsChange(fmt.Sprintf("DeleteDestination %s %s", spec, d.AddrPort()),
		ipvs.Op{Kind: ipvs.OpDeleteDestination, VS: ipvs.VirtualServer{Key: key(spec)}, Dest: d})
}

// listDests observes Destinations of a virtual server the state does not
// list (a missing one).
func getVS(spec string) step {
	return step{name: "VirtualServer " + spec, do: func(s seams) (string, error) {
		vs, err := s.k.VirtualServer(key(spec))
		return vs.String(), err
	}}
}

func listDests(spec string) step {
	return step{name: "Destinations " + spec, do: func(s seams) (string, error) {
		ds, err := s.k.Destinations(key(spec))
		return fmt.Sprint(ds), err
	}}
}

func countDests() step {
	return step{name: "DestinationCounts", do: func(s seams) (string, error) {
		counts, err := s.k.DestinationCounts()
		var out []string
		for k, n := range counts {
			out = append(out, fmt.Sprintf("%s=%d", k, n))
		}
		slices.Sort(out)
		return strings.Join(out, " "), err
	}}
}

func setTimeouts(to ipvs.Timeouts) step {
	return change(fmt.Sprintf("SetTimeouts %+v", to), func(s seams) error { return s.k.SetTimeouts(to) })
}

func addDummy(name string) step {
	return change("AddDummy "+name, func(s seams) error { return s.l.AddDummy(name) })
}

func deleteLink(name string) step {
	return change("DeleteLink "+name, func(s seams) error { return s.l.DeleteLink(name) })
}

// link observes a link's kind, and whether its index is set.
func link(name string) step {
	return step{name: "Link " + name, do: func(s seams) (string, error) {
		info, err := s.l.Link(name)
		return fmt.Sprintf("kind=%q indexed=%t", info.Kind, info.Index > 0), err
	}}
}

func addrs(name string) step {
	return step{name: "Addrs " + name, do: func(s seams) (string, error) {
		as, err := s.l.Addrs(name)
		return fmt.Sprint(as), err
	}}
}

func addAddr(name, p string) step {
	return change("AddAddr "+name+" "+p, func(s seams) error { return s.l.AddAddr(name, netip.MustParsePrefix(p)) })
}

func delAddr(name, p string) step {
	return change("DelAddr "+name+" "+p, func(s seams) error { return s.l.DelAddr(name, netip.MustParsePrefix(p)) })
}

// addAddrs and delAddrs are many address changes in one call (batched
// on the kernel's side): their answers, one per address, are the result.
func addAddrs(name string, ps ...string) step {
	return addrsStep("AddAddrs", name, ps, ipvs.Links.AddAddrs)
}

func delAddrs(name string, ps ...string) step {
	return addrsStep("DelAddrs", name, ps, ipvs.Links.DelAddrs)
}

func addrsStep(op, name string, ps []string, call func(ipvs.Links, string, []netip.Prefix) []error) step {
	return step{name: op + " " + name + " " + strings.Join(ps, " "), do: func(s seams) (string, error) {
		prefixes := make([]netip.Prefix, len(ps))
		for i, p := range ps {
			prefixes[i] = netip.MustParsePrefix(p)
		}
		var out []string
		for _, err := range call(s.l, name, prefixes) {
			out = append(out, errClass(err))
		}
		return strings.Join(out, " "), nil
	}}
}

func getSysctl(k string) step {
	return step{name: "Files.Read " + k, do: func(s seams) (string, error) { return s.sys.Read(sysctl.Path(k)) }}
}

func setSysctl(k, v string) step {
	return change("Files.Write "+k+"="+v, func(s seams) error { return s.sys.Write(sysctl.Path(k), v) })
}

// unloadSchedulersAfter unloads, when t ends, the IPVS scheduler modules
// that t loaded: asking the kernel for every scheduler loads them all,
// and later tests in the same boot rely on one being unloadable
// (integration/traffic's TestMissingSchedulerModuleStaysWithItsService).
func unloadSchedulersAfter(t *testing.T) {
	before := ipvsModules(t)
	t.Cleanup(func() {
		// No virtual server may hold a scheduler module.
		if h, err := mobyipvs.New(""); err == nil {
			_ = h.Flush()
			h.Close()
		}
		for m := range ipvsModules(t) {
			if !before[m] && strings.HasPrefix(m, "ip_vs_") && m != "ip_vs" {
				if err := unix.DeleteModule(m, unix.O_NONBLOCK); err != nil {
					t.Logf("unload %s: %v", m, err)
				}
			}
		}
	})
}

// ipvsModules lists the loaded modules named ip_vs*.
func ipvsModules(t *testing.T) map[string]bool {
	b, err := os.ReadFile("/proc/modules")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, "ip_vs") {
			out[name] = true
		}
	}
	return out
}
