package leftovers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// getsockopt options of x_tables (linux/netfilter_ipv4/ip_tables.h,
// ip6_tables.h): the same numbers at SOL_IP and SOL_IPV6.
const (
	xtSoGetInfo    = 64 // IPT_SO_GET_INFO
	xtSoGetEntries = 65 // IPT_SO_GET_ENTRIES
	xtTableMaxName = 32
	// ipt_getinfo: name[32], valid_hooks, hook_entry[5], underflow[5],
	// num_entries, size.
	xtGetInfoLen     = 84
	xtGetInfoSizeOff = 80
	// ipt_get_entries: name[32], size, then the entries at offset 40
	// (aligned for their 64-bit counters).
	xtGetEntriesHeader = 40
)

// LegacyNATChains reads the user-defined chains of iptables-legacy's nat
// table of a family and their rule counts, as iptables-legacy-save would
// (getsockopt IPT_SO_GET_INFO and IPT_SO_GET_ENTRIES on a raw socket;
// CAP_NET_ADMIN). It reads only a table /proc lists: asking for one that
// is not loaded would load its module. nil when there is none.
func (h Host) LegacyNATChains(v6 bool) (map[string]int, error) {
	fam, names := "ip", "/net/ip_tables_names"
	if v6 {
		fam, names = "ip6", "/net/ip6_tables_names"
	}
	b, err := os.ReadFile(h.Proc + names)
	if err != nil || !slices.Contains(strings.Fields(string(b)), "nat") {
		return nil, nil
	}
	blob, _, err := readXtTable(v6, "nat")
	if err != nil {
		return nil, fmt.Errorf("read iptables-legacy table %s nat: %w", fam, err)
	}
	l := iptEntry
	if v6 {
		l = ip6tEntry
	}
	chains, err := xtChainRules(blob, l)
	if err != nil {
		return nil, fmt.Errorf("iptables-legacy table %s nat: %w", fam, err)
	}
	return chains, nil
}

// LegacyForwardPolicy reads the policy of iptables-legacy's filter
// FORWARD chain of a family ("DROP", "ACCEPT"), as iptables-legacy -S
// FORWARD shows it; "" when there is no legacy filter table (/proc does
// not list it: asking for it would load its module).
func (h Host) LegacyForwardPolicy(v6 bool) (string, error) {
	fam, names := "ip", "/net/ip_tables_names"
	if v6 {
		fam, names = "ip6", "/net/ip6_tables_names"
	}
	b, err := os.ReadFile(h.Proc + names)
	if err != nil || !slices.Contains(strings.Fields(string(b)), "filter") {
		return "", nil
	}
	blob, info, err := readXtTable(v6, "filter")
	if err != nil {
		return "", fmt.Errorf("read iptables-legacy table %s filter: %w", fam, err)
	}
	l := iptEntry
	if v6 {
		l = ip6tEntry
	}
	policy, err := xtHookPolicy(blob, info, xtHookForward, l)
	if err != nil {
		return "", fmt.Errorf("iptables-legacy table %s filter, chain FORWARD: %w", fam, err)
	}
	return policy, nil
}

// readXtTable returns a table's entries blob and its ipt_getinfo. The
// table may change between the two reads (EAGAIN): it is read again, a
// few times.
func readXtTable(v6 bool, table string) (blob, info []byte, err error) {
	domain, level := unix.AF_INET, unix.SOL_IP
	if v6 {
		domain, level = unix.AF_INET6, unix.SOL_IPV6
	}
	fd, err := unix.Socket(domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return nil, nil, fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	for range 5 {
		info := make([]byte, xtGetInfoLen)
		copy(info, table)
		if err := getsockopt(fd, level, xtSoGetInfo, info); err != nil {
			return nil, nil, fmt.Errorf("IPT_SO_GET_INFO: %w", err)
		}
		size := int(binary.NativeEndian.Uint32(info[xtGetInfoSizeOff:]))
		req := make([]byte, xtGetEntriesHeader+size)
		copy(req, table)
		binary.NativeEndian.PutUint32(req[xtTableMaxName:], uint32(size))
		err := getsockopt(fd, level, xtSoGetEntries, req)
		if errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("IPT_SO_GET_ENTRIES: %w", err)
		}
		return req[xtGetEntriesHeader:], info, nil
	}
	return nil, nil, fmt.Errorf("IPT_SO_GET_ENTRIES: the table kept changing: %w", unix.EAGAIN)
}

// getsockopt reads into b, whose length is the option's.
func getsockopt(fd, level, opt int, b []byte) error {
	n := uint32(len(b))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return e
	}
	return nil
}
