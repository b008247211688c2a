package nlfamily

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenCountsThisProcessSockets: a NETLINK_ROUTE socket opened here is
// counted, and closing it uncounts it.
func TestOpenCountsThisProcessSockets(t *testing.T) {
	before, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		t.Skipf("no netlink here: %v", err)
	}
	// Only a bound socket is listed (the kernel hashes it at bind).
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	during, err := Open()
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	if during[unix.NETLINK_ROUTE] != before[unix.NETLINK_ROUTE]+1 {
		t.Errorf("NETLINK_ROUTE sockets: %d with one more open, %d before", during[unix.NETLINK_ROUTE], before[unix.NETLINK_ROUTE])
	}
	after, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	if after[unix.NETLINK_ROUTE] != before[unix.NETLINK_ROUTE] {
		t.Errorf("NETLINK_ROUTE sockets: %d after closing, %d before", after[unix.NETLINK_ROUTE], before[unix.NETLINK_ROUTE])
	}
}

// TestErrorNamesTheFamilyAndModule: a family the kernel lacks is named
// with the module to load; other errors name the family.
func TestErrorNamesTheFamilyAndModule(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto int
		err   error
		want  string
	}{
		{"a missing module is named", unix.NETLINK_NETFILTER, unix.EPROTONOSUPPORT,
			"nftables: open a NETLINK_NETFILTER socket: the kernel lacks it (load module nfnetlink): protocol not supported"},
		{"another error names the family only", unix.NETLINK_ROUTE, unix.EPERM,
			"nftables: open a NETLINK_ROUTE socket: operation not permitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Error("nftables", tc.proto, tc.err)
			if err.Error() != tc.want {
				t.Errorf("got  %s\nwant %s", err, tc.want)
			}
			if !strings.Contains(err.Error(), Name(tc.proto)) {
				t.Errorf("%s does not name %s", err, Name(tc.proto))
			}
		})
	}
	if Error("x", unix.NETLINK_ROUTE, nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}
