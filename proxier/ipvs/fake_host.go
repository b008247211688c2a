package ipvs

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
)

// FakeLinks is an in-memory set of links and addresses that answers as
// rtnetlink does: EEXIST for a duplicate link or address, ENODEV for a
// missing link, EADDRNOTAVAIL for a missing address.
type FakeLinks struct {
	mu        sync.Mutex
	links     map[string]*fakeLink
	lastIndex int
	Fault     FaultFunc
}

type fakeLink struct {
	index int
	kind  string
	alias string
	addrs map[netip.Prefix]bool
}

// NewFakeLinks returns a host with only lo (index 1); each new link gets
// the next index, as the kernel's.
func NewFakeLinks() *FakeLinks {
	return &FakeLinks{lastIndex: 1, links: map[string]*fakeLink{"lo": {index: 1, kind: "device", addrs: map[netip.Prefix]bool{}}}}
}

var _ Links = (*FakeLinks)(nil)

func (f *FakeLinks) fault(op, target string) error {
	if f.Fault == nil {
		return nil
	}
	return f.Fault(op, target)
}

// AddLink adds a link of any kind (for tests: foreign links).
func (f *FakeLinks) AddLink(name, kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case len(name) >= ifNameSize:
		return syscall.ERANGE // rtnetlink's attribute policy refuses the name
	case f.links[name] != nil:
		return syscall.EEXIST
	}
	f.lastIndex++
	f.links[name] = &fakeLink{index: f.lastIndex, kind: kind, addrs: map[netip.Prefix]bool{}}
	return nil
}

// ifNameSize is the kernel's IFNAMSIZ: a link name is at most 15 bytes.
const ifNameSize = 16

// Link implements Links.
func (f *FakeLinks) Link(name string) (LinkInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("get-link", name); err != nil {
		return LinkInfo{}, err
	}
	l := f.links[name]
	if l == nil {
		return LinkInfo{}, syscall.ENODEV
	}
	return LinkInfo{Index: l.index, Kind: l.kind, Alias: l.alias}, nil
}

// AddDummy implements Links.
func (f *FakeLinks) AddDummy(name string) error {
	if err := f.fault("add-link", name); err != nil {
		return err
	}
	if err := f.AddLink(name, "dummy"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links[name].alias = LinkAlias
	return nil
}

// DeleteLink implements Links.
func (f *FakeLinks) DeleteLink(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("delete-link", name); err != nil {
		return err
	}
	if f.links[name] == nil {
		return syscall.ENODEV
	}
	delete(f.links, name)
	return nil
}

// Addrs implements Links.
func (f *FakeLinks) Addrs(name string) ([]netip.Prefix, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("list-addresses", name); err != nil {
		return nil, err
	}
	l := f.links[name]
	if l == nil {
		return nil, syscall.ENODEV
	}
	return slices.SortedFunc(maps.Keys(l.addrs), comparePrefixes), nil
}

// AddAddr implements Links.
func (f *FakeLinks) AddAddr(name string, p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("add-address", name+" "+p.String()); err != nil {
		return err
	}
	l := f.links[name]
	switch {
	case l == nil:
		return syscall.ENODEV
	case l.addrs[p]:
		return syscall.EEXIST
	}
	l.addrs[p] = true
	return nil
}

// DelAddr implements Links.
func (f *FakeLinks) DelAddr(name string, p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("delete-address", name+" "+p.String()); err != nil {
		return err
	}
	l := f.links[name]
	switch {
	case l == nil:
		return syscall.ENODEV
	case !l.addrs[p]:
		return syscall.EADDRNOTAVAIL
	}
	delete(l.addrs, p)
	return nil
}

// AddAddrs implements Links, one AddAddr at a time.
func (f *FakeLinks) AddAddrs(name string, ps []netip.Prefix) []error {
	return eachAddr(ps, func(p netip.Prefix) error { return f.AddAddr(name, p) })
}

// DelAddrs implements Links, one DelAddr at a time.
func (f *FakeLinks) DelAddrs(name string, ps []netip.Prefix) []error {
	return eachAddr(ps, func(p netip.Prefix) error { return f.DelAddr(name, p) })
}

func eachAddr(ps []netip.Prefix, fn func(netip.Prefix) error) []error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = fn(p)
	}
	return errs
}

// Dump renders links and their addresses, sorted.
func (f *FakeLinks) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(f.links)) {
		l := f.links[name]
		fmt.Fprintf(&b, "link %s %s\n", name, l.kind)
		for _, p := range slices.SortedFunc(maps.Keys(l.addrs), comparePrefixes) {
			fmt.Fprintf(&b, "  addr %s\n", p)
		}
	}
	return b.String()
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// FakeSysctls is an in-memory /proc/sys holding the keys the Writer uses
// (all "0" at first); other keys are ENOENT, to Set as to Get (procfs
// creates no files).
type FakeSysctls struct {
	mu     sync.Mutex
	values map[string]string
	Fault  FaultFunc
}

// NewFakeSysctls returns the keys the Writer uses, all "0".
func NewFakeSysctls() *FakeSysctls {
	f := &FakeSysctls{values: map[string]string{}}
	for _, s := range (&Writer{cfg: Config{StrictARP: true}}).sysctlList() {
		f.values[s.key] = "0"
	}
	return f
}

var _ sysctl.Files = (*FakeSysctls)(nil)

// Read implements sysctl.Files: a file under /proc/sys is its key's
// value; any other path is ENOENT.
func (f *FakeSysctls) Read(path string) (string, error) {
	key, ok := sysctl.Key(path)
	if !ok {
		return "", syscall.ENOENT
	}
	return f.Get(key)
}

// Write implements sysctl.Files, as Read.
func (f *FakeSysctls) Write(path, value string) error {
	key, ok := sysctl.Key(path)
	if !ok {
		return syscall.ENOENT
	}
	return f.Set(key, value)
}

// Get returns a key's value, as Read its file's.
func (f *FakeSysctls) Get(key string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Fault != nil {
		if err := f.Fault("get-sysctl", key); err != nil {
			return "", err
		}
	}
	v, ok := f.values[key]
	if !ok {
		return "", syscall.ENOENT
	}
	return v, nil // as the adapter returns it: trimmed
}

// Set sets a key's value, as Write its file's.
func (f *FakeSysctls) Set(key, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Fault != nil {
		if err := f.Fault("set-sysctl", key); err != nil {
			return err
		}
	}
	if _, ok := f.values[key]; !ok {
		return syscall.ENOENT
	}
	f.values[key] = value
	return nil
}

// Create adds key with value, as a kernel that has that sysctl (say
// ConnReuseModeKey, which Linux has from 4.1).
func (f *FakeSysctls) Create(key, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.values[key] = value
}

// Dump renders the keys and values, sorted.
func (f *FakeSysctls) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(f.values)) {
		fmt.Fprintf(&b, "sysctl %s=%s\n", k, f.values[k])
	}
	return b.String()
}
