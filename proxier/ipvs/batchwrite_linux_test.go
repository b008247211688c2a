package ipvs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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
			if g := errnos(errs); g != tc.want {
				t.Errorf("answers %q, want %q", g, tc.want)
			}
		})
	}
}
