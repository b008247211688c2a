package nlfamily

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// families names the netlink families the data plane uses, with the
// module that provides each ("" when it is part of every kernel).
var families = map[int]struct{ name, module string }{
	unix.NETLINK_ROUTE:     {"NETLINK_ROUTE", ""},
	unix.NETLINK_GENERIC:   {"NETLINK_GENERIC", ""},
	unix.NETLINK_NETFILTER: {"NETLINK_NETFILTER", "nfnetlink"},
	unix.NETLINK_XFRM:      {"NETLINK_XFRM", "xfrm_user"},
}

// Name returns the family's constant name, or "netlink family N".
func Name(proto int) string {
	if f, ok := families[proto]; ok {
		return f.name
	}
	return "netlink family " + strconv.Itoa(proto)
}

// Error wraps err, from opening a socket of the family proto for what,
// naming the family and, when the kernel does not support it
// (EPROTONOSUPPORT), the module that provides it. A nil err stays nil.
func Error(what string, proto int, err error) error {
	if err == nil {
		return nil
	}
	if f, ok := families[proto]; ok && f.module != "" && errors.Is(err, unix.EPROTONOSUPPORT) {
		return fmt.Errorf("%s: open a %s socket: the kernel lacks it (load module %s): %w", what, f.name, f.module, err)
	}
	return fmt.Errorf("%s: open a %s socket: %w", what, Name(proto), err)
}

// Open counts this process's open, bound netlink sockets by family: the
// sockets among /proc/self/fd, matched by inode with
// /proc/self/net/netlink (which lists a socket once it is bound).
func Open() (map[int]int, error) {
	inodes := map[uint64]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("list open files: %w", err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]"), 10, 64); err == nil {
			inodes[n] = true
		}
	}
	f, err := os.Open("/proc/self/net/netlink")
	if err != nil {
		return nil, fmt.Errorf("read netlink sockets: %w", err)
	}
	defer f.Close()
	out := map[int]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[0] == "sk" {
			continue
		}
		proto, err1 := strconv.Atoi(fields[1])
		inode, err2 := strconv.ParseUint(fields[9], 10, 64)
		if err1 == nil && err2 == nil && inodes[inode] {
			out[proto]++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read netlink sockets: %w", err)
	}
	return out, nil
}
