package ipvsnl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/errnos"
)

// TestBatchAnswersOnTheHostKernel holds the batch mechanics to a real
// kernel without IPVS (the host's): the generic netlink controller
// stands in for the IPVS family, and a request for an unknown family
// fails (ENOENT) as an IPVS change can. Several requests go in one
// sendmsg, only the last asks for an acknowledgement, and each failure
// is matched to its request by sequence number, across as many sendmsgs
// as the limits make. The IPVS requests themselves are proved in the VM
// lab (integration/ipvswriter, TestKernelContractInOneWrite).
func TestBatchAnswersOnTheHostKernel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		names  string // families asked for; "x" for an unknown one
		maxOps int
		want   string
	}{
		{"all succeed in one batch", "nlctrl nlctrl nlctrl", 10, "ok ok ok"},
		{"a failure in the middle is its request's alone", "nlctrl x nlctrl nlctrl", 10, "ok ENOENT ok ok"},
		{"the last request failing answers the batch", "nlctrl nlctrl x", 10, "ok ok ENOENT"},
		{"failures in several batches, each matched", "x nlctrl x nlctrl nlctrl x x", 2, "ENOENT ok ENOENT ok ok ENOENT ENOENT"},
		{"a batch of one", "x nlctrl", 1, "ENOENT ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := openGenlSocket()
			if err != nil {
				t.Skipf("no generic netlink socket here: %v", err)
			}
			w := &batchSender{s: s, maxOps: tc.maxOps, maxBytes: 1 << 16}
			defer w.Close()
			names := strings.Fields(tc.names)
			reqs := make([]request, len(names))
			index := make([]int, len(names))
			for i, n := range names {
				if n == "x" {
					n = fmt.Sprintf("nofamily%d", i) // under GENL_NAMSIZ, or the kernel says EINVAL
				}
				ae := netlink.NewAttributeEncoder()
				ae.String(unix.CTRL_ATTR_FAMILY_NAME, n)
				attrs, err := ae.Encode()
				if err != nil {
					t.Fatal(err)
				}
				reqs[i] = request{typ: unix.GENL_ID_CTRL, body: append([]byte{unix.CTRL_CMD_GETFAMILY, 1, 0, 0}, attrs...)}
				index[i] = i
			}
			errs := make([]error, len(names))
			w.sendAll(reqs, index, errs)
			if g := errnos.Names(errs); g != tc.want {
				t.Errorf("answers %q, want %q", g, tc.want)
			}
		})
	}
}

// TestBatchSenderKeepsNoColdStartBuffer: after a batch larger than
// keepBatchBuffer (a cold start's), the sender lets its encoding buffer
// go, so that a cold start's megabyte does not stay in the live heap.
// The requests are NLMSG_NOOPs, which the kernel answers only when asked
// to (the last one), whatever their number.
func TestBatchSenderKeepsNoColdStartBuffer(t *testing.T) {
	s, err := openGenlSocket()
	if err != nil {
		t.Skipf("no generic netlink socket here: %v", err)
	}
	w := &batchSender{s: s, maxOps: 1 << 16, maxBytes: 1 << 20}
	defer w.Close()
	if snd, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
		w.maxBytes = snd - opSendMargin
	}
	req := request{typ: unix.NLMSG_NOOP, body: make([]byte, 256)}
	n := 2*keepBatchBuffer/len(req.body) + 1
	reqs, index := make([]request, n), make([]int, n)
	for i := range reqs {
		reqs[i], index[i] = req, i
	}
	errs := make([]error, n)
	w.sendAll(reqs, index, errs)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("the batch: %v", err)
	}
	if c := cap(w.buf); c > keepBatchBuffer {
		t.Errorf("the sender keeps a %d-byte buffer after the batch, want at most %d", c, keepBatchBuffer)
	}
}
