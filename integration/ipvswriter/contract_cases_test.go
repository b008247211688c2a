//go:build integration

package ipvswriter

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// Names and addresses of the contract cases.
const (
	vip4   = "10.96.0.10:80/TCP"
	vip6   = "[fd00:96::10]:80/TCP"
	arpKey = "net/ipv4/conf/all/arp_ignore" // a sysctl the Writer sets; restored after the test
	// longName is one byte over IFNAMSIZ-1, the longest link name.
	longName = "kube-ipvs0-long0"
)

var (
	pod1  = dest("10.244.1.5:8080", 1)
	pod2  = dest("10.244.2.6:8080", 1)
	pod3  = dest("10.244.3.7:8080", 1)
	pod61 = dest("[fd00:244::5]:8080", 1)
	pod62 = dest("[fd00:244::6]:8080", 1)
)

// mixedFamily is why a destination of the other family is not compared.
// moby/ipvs sends no destination address family, so the kernel takes the
// virtual server's and reads the address bytes as that family: 10.244.1.5
// on an IPv6 virtual server is stored as [af4:105::]. The fake cannot
// model the mangling sensibly, and the Writer never asks for it
// (translate refuses a destination of another family).
const mixedFamily = "a destination of the other family is mangled by moby/ipvs, not refused"

// weighted is d with another weight.
func weighted(d ipvs.Destination, w int32) ipvs.Destination {
	d.Weight = w
	return d
}

// schedulerSteps adds one virtual server per scheduler: those a service
// may ask for (policy.Schedulers), "twos" (in Linux since 6.2), "none"
// (the kernel's name for no scheduler) and an unknown one.
func schedulerSteps() []step {
	var steps []step
	for i, s := range append(slices.Clone(policy.Schedulers), "twos", "none", "nope") {
		steps = append(steps, addVS(virt(fmt.Sprintf("10.96.1.%d:80/TCP", i+1), s, 0, 0)))
	}
	return steps
}

func contractCases() []contractCase {
	const (
		persistent = ipvs.FlagPersistent
		shFlags    = ipvs.FlagSched1 | ipvs.FlagSched2 // sh-fallback, sh-port (mh-* are the same bits)
	)
	return []contractCase{
		{"adding a virtual server twice is EEXIST, whatever the second asks for", []step{
			addVS(virt(vip4, "rr", 0, 0)),
			addVS(virt(vip4, "rr", 0, 0)),
			addVS(virt(vip4, "wrr", persistent, 60)),
			addVS(virt(vip4, "nope", 0, 0)),
		}},
		{"reading, changing or deleting a missing virtual server is ESRCH", []step{
			getVS(vip4),
			updateVS(virt(vip4, "rr", 0, 0)),
			updateVS(virt(vip4, "nope", 0, 0)),
			deleteVS(vip4),
			addVS(virt(vip4, "rr", 0, 0)),
			getVS(vip4),
			getVS("10.96.0.10:80/UDP"),
			getVS("10.96.0.10:81/TCP"),
			deleteVS(vip4),
			getVS(vip4),
			deleteVS(vip4),
			addVS(virt(vip6, "wrr", persistent, 60)),
			getVS(vip6),
		}},
		{"the schedulers services may ask for exist, an unknown one is ENOENT", schedulerSteps()},
		{"an unknown scheduler is ENOENT on update and leaves the virtual server as it was", []step{
			addVS(virt(vip4, "wrr", 0, 0)),
			updateVS(virt(vip4, "nope", persistent, 60)),
		}},
		{"update changes scheduler, scheduler flags and persistence in place", []step{
			addVS(virt(vip4, "rr", 0, 0)),
			addDest(vip4, pod1),
			updateVS(virt(vip4, "wrr", persistent, 10800)),
			updateVS(virt(vip4, "lc", persistent, 30)),
			updateVS(virt(vip4, "sh", shFlags, 0)),
			updateVS(virt(vip4, "mh", ipvs.FlagSched1, 0)),
			updateVS(virt(vip4, "mh", ipvs.FlagSched2|persistent, 300)),
			getVS(vip4),
			updateVS(virt(vip4, "rr", 0, 0)),
		}},
		{"sh and mh keep their flags from the first add", []step{
			addVS(virt("10.96.0.11:80/TCP", "sh", shFlags, 0)),
			addVS(virt("10.96.0.12:80/TCP", "mh", ipvs.FlagSched1, 0)),
			addVS(virt("10.96.0.13:80/UDP", "mh", ipvs.FlagSched2|persistent, 10800)),
			addVS(virt("10.96.0.14:80/UDP", "rr", ipvs.FlagOnePacket, 0)),
		}},
		{"TCP, UDP and SCTP on one address and port are three virtual servers, in both families", []step{
			addVS(virt("10.96.0.10:53/TCP", "rr", 0, 0)),
			addVS(virt("10.96.0.10:53/UDP", "rr", 0, 0)),
			addVS(virt("10.96.0.10:53/SCTP", "rr", 0, 0)),
			addVS(virt("[fd00:96::10]:53/TCP", "rr", 0, 0)),
			addVS(virt("[fd00:96::10]:53/UDP", "rr", persistent, 10800)),
			addVS(virt("[fd00:96::10]:53/SCTP", "rr", 0, 0)),
			addDest("10.96.0.10:53/UDP", dest("10.244.1.5:53", 1)),
			addDest("10.96.0.10:53/SCTP", dest("10.244.1.5:53", 1)),
			addDest("[fd00:96::10]:53/UDP", dest("[fd00:244::5]:53", 1)),
			addDest("[fd00:96::10]:53/SCTP", dest("[fd00:244::5]:53", 1)),
			deleteVS("10.96.0.10:53/UDP"),
			deleteVS("[fd00:96::10]:53/SCTP"),
			deleteVS("10.96.0.10:53/UDP"),
		}},
		{"destinations: a duplicate is EEXIST, a missing one ENOENT, weight 0 drains", []step{
			addVS(virt(vip4, "wrr", 0, 0)),
			addDest(vip4, pod1),
			addDest(vip4, weighted(pod2, 0)),
			addDest(vip4, pod1),
			addDest(vip4, weighted(pod1, 7)),
			updateDest(vip4, weighted(pod1, 5)),
			updateDest(vip4, weighted(pod1, 0)),
			updateDest(vip4, weighted(pod2, 3)),
			updateDest(vip4, pod3),
			deleteDest(vip4, pod3),
			deleteDest(vip4, pod1),
			deleteDest(vip4, pod1),
			addDest(vip4, pod1),
		}},
		{"a negative weight is ERANGE, checked before the destination is looked up", []step{
			addVS(virt(vip4, "rr", 0, 0)),
			addDest(vip4, weighted(pod1, -1)),
			addDest(vip4, pod1),
			addDest(vip4, weighted(pod1, -1)),
			updateDest(vip4, weighted(pod1, -1)),
			updateDest(vip4, weighted(pod2, -1)),
		}},
		{"destinations of a missing virtual server: listed empty, changed ESRCH", []step{
			listDests(vip4),
			addDest(vip4, pod1),
			updateDest(vip4, pod1),
			deleteDest(vip4, pod1),
			listDests(vip6),
			addDest(vip6, pod61),
		}},
		{"every virtual server's destinations are counted in one read, 0 for none, IPv6 too", []step{
			countDests(),
			addVS(virt(vip4, "rr", 0, 0)),
			addVS(virt(vip6, "rr", 0, 0)),
			countDests(),
			addDest(vip4, pod1),
			addDest(vip4, pod2),
			addDest(vip6, pod61),
			countDests(),
			deleteDest(vip4, pod1),
			countDests(),
		}},
		{"deleting a virtual server deletes its destinations", []step{
			addVS(virt(vip4, "rr", 0, 0)),
			addDest(vip4, pod1),
			addDest(vip4, pod2),
			deleteVS(vip4),
			listDests(vip4),
			addVS(virt(vip4, "rr", 0, 0)),
		}},
		{"IPv6 virtual servers and destinations", []step{
			addVS(virt(vip6, "rr", 0, 0)),
			addDest(vip6, pod61),
			addDest(vip6, weighted(pod62, 0)),
			addDest(vip6, pod61),
			updateDest(vip6, weighted(pod62, 4)),
			updateDest(vip6, dest("[fd00:244::7]:8080", 1)),
			deleteDest(vip6, pod61),
			deleteDest(vip6, pod61),
			skipped(addDest(vip6, pod1), mixedFamily),
			addVS(virt(vip4, "rr", 0, 0)),
			skipped(addDest(vip4, pod61), mixedFamily),
			addDest(vip4, pod1),
		}},
		{"timeouts round trip; zero leaves one unchanged; seconds are whole", []step{
			setTimeouts(ipvs.Timeouts{TCP: time.Hour, UDP: 45 * time.Second}),
			setTimeouts(ipvs.Timeouts{TCPFin: 30 * time.Second}),
			setTimeouts(ipvs.Timeouts{}),
			setTimeouts(ipvs.Timeouts{TCP: 1500 * time.Millisecond, UDP: 500 * time.Millisecond}),
		}},
		{"links: a missing link is ENODEV, a duplicate dummy EEXIST, a name over 15 bytes ERANGE", []step{
			link(dummy),
			link("lo"),
			deleteLink(dummy),
			addrs(dummy),
			addAddr(dummy, "10.96.0.10/32"),
			delAddr(dummy, "10.96.0.10/32"),
			addDummy(dummy),
			link(dummy),
			addDummy(dummy),
			deleteLink(dummy),
			deleteLink(dummy),
			addDummy(longName),
			link(longName),
			deleteLink(longName),
			addrs(longName),
		}},
		{"addresses: a duplicate is EEXIST, a missing one EADDRNOTAVAIL", []step{
			addDummy(dummy),
			addrs(dummy),
			addAddr(dummy, "10.96.0.10/32"),
			addAddr(dummy, "10.96.0.10/32"),
			addAddr(dummy, "fd00:96::10/128"),
			addAddr(dummy, "fd00:96::10/128"),
			addAddr(dummy, "10.96.0.11/32"),
			delAddr(dummy, "10.96.0.12/32"),
			delAddr(dummy, "fd00:96::12/128"),
			delAddr(dummy, "10.96.0.10/32"),
			delAddr(dummy, "10.96.0.10/32"),
			delAddr(dummy, "fd00:96::10/128"),
			addrs(dummy),
		}},
		{"addresses in one call: each answer its own address's, as one at a time; a missing link ENODEV for each", []step{
			addAddrs(dummy, "10.96.0.20/32"),
			addDummy(dummy),
			addAddrs(dummy, "10.96.0.20/32", "fd00:96::20/128", "10.96.0.21/32"),
			addAddrs(dummy, "10.96.0.22/32", "10.96.0.20/32", "fd00:96::20/128", "10.96.0.23/32"),
			addrs(dummy),
			delAddrs(dummy, "10.96.0.20/32", "10.96.0.29/32", "fd00:96::20/128", "fd00:96::29/128"),
			delAddrs(dummy),
			addrs(dummy),
			deleteLink(dummy),
			delAddrs(dummy, "10.96.0.21/32", "10.96.0.22/32"),
		}},
		{"sysctls: a missing key is ENOENT to read and to write; a value reads back trimmed", []step{
			getSysctl("net/ipv4/vs/nope"),
			setSysctl("net/ipv4/vs/nope", "1"),
			setSysctl("net/nope/nope", "1"),
			setSysctl(arpKey, "0"),
			getSysctl(arpKey),
			setSysctl(arpKey, "1"),
			getSysctl(arpKey),
		}},
	}
}

// TestKernelContractCoversEveryOperation: every method of the three
// interfaces is a step of some case that runs (Write's in writeCases, which
// TestKernelContractInOneWrite runs), or is read by render after every
// step, so a method added to them needs a contract case.
func TestKernelContractCoversEveryOperation(t *testing.T) {
	seen := map[string]bool{"VirtualServers": true, "Timeouts": true} // read by render
	for _, tc := range append(contractCases(), writeCases()...) {
		for _, s := range tc.steps {
			if s.skip == "" {
				op, _, _ := strings.Cut(s.name, " ")
				seen[op] = true
			}
		}
	}
	for _, it := range []reflect.Type{reflect.TypeFor[ipvs.Kernel](), reflect.TypeFor[ipvs.Links](),
		reflect.TypeFor[sysctl.Files]()} {
		for i := range it.NumMethod() {
			m := it.Method(i).Name
			if !seen[m] && !seen[it.Name()+"."+m] {
				t.Errorf("ipvs.%s.%s has no contract step", it.Name(), m)
			}
		}
	}
}
