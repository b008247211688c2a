package leftovers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setsockopt options of x_tables (linux/netfilter_ipv4/ip_tables.h,
// ip6_tables.h): the same numbers at SOL_IP and SOL_IPV6.
const (
	xtSoSetReplace     = 64 // IPT_SO_SET_REPLACE
	xtSoSetAddCounters = 65 // IPT_SO_SET_ADD_COUNTERS
	// ipt_replace: name[32], valid_hooks, num_entries, size,
	// hook_entry[5], underflow[5], num_counters, then the counters
	// pointer at 88 and the entries at 96 (ip6t_replace is the same).
	xtReplaceNumEntriesOff  = 36
	xtReplaceHookEntryOff   = 44
	xtReplaceNumCountersOff = 84
	xtReplaceCountersOff    = 88
	xtReplaceHeader         = 96
	// xt_counters_info: name[32], num_counters, then the counters at 40.
	xtCountersInfoHeader = 40
)

// The xtables lock iptables-legacy takes (-w) before it reads a table to
// change it, and how long to wait for it: kube-proxy's own -w 5.
const (
	xtLockFile = "/run/xtables.lock"
	xtLockWait = 5 * time.Second
)

// xtLegacyTables are the tables kube-proxy writes, and the only ones
// edited here.
var xtLegacyTables = []string{"filter", "nat", "mangle"}

// RemoveLegacyChains removes kube-proxy's chains, with every rule that
// jumps to one, from iptables-legacy's filter, nat and mangle tables of
// both families, as iptables-legacy -w would: under the xtables lock,
// each table read, spliced (spliceXtTable) and written back whole with
// IPT_SO_SET_REPLACE, its rules' counters carried over. Only tables /proc
// lists are touched (asking for another would load its module); a table
// that changed between the read and the write (EAGAIN) is done again. An
// error in one table does not stop the others; the errors are joined.
func (h Host) RemoveLegacyChains() ([]LegacyRemoval, error) {
	type table struct {
		v6   bool
		name string
	}
	var tables []table
	for _, f := range []struct {
		v6   bool
		file string
	}{{false, "/net/ip_tables_names"}, {true, "/net/ip6_tables_names"}} {
		b, err := os.ReadFile(h.Proc + f.file)
		if err != nil {
			continue
		}
		for _, t := range xtLegacyTables {
			if slices.Contains(strings.Fields(string(b)), t) {
				tables = append(tables, table{f.v6, t})
			}
		}
	}
	if len(tables) == 0 {
		return nil, nil
	}
	unlock, err := lockXtables(xtLockFile, xtLockWait)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []LegacyRemoval
	var errs []error
	for _, t := range tables {
		r, err := removeLegacyTable(xtSockets{}, t.v6, t.name)
		if err != nil {
			errs = append(errs, fmt.Errorf("iptables-legacy table %s: %w", r.Table, err))
		}
		if len(r.Chains) > 0 {
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

// lockXtables takes the xtables lock as iptables does (flock on the file,
// created if missing), trying for up to wait; unlock releases it.
func lockXtables(path string, wait time.Duration) (unlock func(), err error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the xtables lock %s: %w", path, err)
	}
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Since(start) >= wait {
			unix.Close(fd)
			return nil, fmt.Errorf("take the xtables lock %s (waited %v): %w", path, wait, err)
		}
	}
}

// xtSockets is the running kernel's x_tables, over raw sockets.
type xtSockets struct{}

func (xtSockets) read(v6 bool, table string) ([]byte, []byte, error) { return readXtTable(v6, table) }
func (xtSockets) replace(v6 bool, table string, sp xtSplice, oldEntries uint32) ([]byte, error) {
	return replaceXtTable(v6, table, sp, oldEntries)
}
func (xtSockets) addCounters(v6 bool, table string, counters []byte) error {
	return addXtCounters(v6, table, counters)
}

// replaceXtTable writes a spliced table over one of oldEntries entries
// (the kernel answers EAGAIN if the table no longer has that many) and
// returns the old table's counters, one per old entry, as the kernel
// hands them back.
func replaceXtTable(v6 bool, table string, sp xtSplice, oldEntries uint32) ([]byte, error) {
	req := make([]byte, xtReplaceHeader+len(sp.Blob))
	copy(req, table)
	u32 := func(off int, v uint32) { binary.NativeEndian.PutUint32(req[off:], v) }
	u32(xtInfoValidHooksOff, sp.Info.ValidHooks)
	u32(xtReplaceNumEntriesOff, sp.Info.NumEntries)
	u32(xtReplaceNumEntriesOff+4, sp.Info.Size)
	for h := range xtNumHooks {
		u32(xtReplaceHookEntryOff+4*h, sp.Info.HookEntry[h])
		u32(xtReplaceHookEntryOff+4*xtNumHooks+4*h, sp.Info.Underflow[h])
	}
	u32(xtReplaceNumCountersOff, oldEntries)
	counters := make([]byte, xtCounterSize*max(oldEntries, 1))
	binary.NativeEndian.PutUint64(req[xtReplaceCountersOff:], uint64(uintptr(unsafe.Pointer(&counters[0]))))
	copy(req[xtReplaceHeader:], sp.Blob)
	err := xtSetsockopt(v6, xtSoSetReplace, req)
	runtime.KeepAlive(counters)
	return counters, err
}

// addXtCounters adds counters, one per entry of the table in its order,
// to a table's (IPT_SO_SET_ADD_COUNTERS).
func addXtCounters(v6 bool, table string, counters []byte) error {
	req := make([]byte, xtCountersInfoHeader+len(counters))
	copy(req, table)
	binary.NativeEndian.PutUint32(req[xtTableMaxName:], uint32(len(counters)/xtCounterSize))
	copy(req[xtCountersInfoHeader:], counters)
	return xtSetsockopt(v6, xtSoSetAddCounters, req)
}

// xtSetsockopt sets an x_tables option of a family on a raw socket.
func xtSetsockopt(v6 bool, opt int, b []byte) error {
	domain, level := unix.AF_INET, unix.SOL_IP
	if v6 {
		domain, level = unix.AF_INET6, unix.SOL_IPV6
	}
	fd, err := unix.Socket(domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0)
	if e != 0 {
		return e
	}
	return nil
}
