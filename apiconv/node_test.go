package apiconv

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testNode(addresses ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status:     corev1.NodeStatus{Addresses: addresses},
	}
}

func nodeAddr(t corev1.NodeAddressType, a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: t, Address: a}
}

func TestNode(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want *policy.Node
	}{
		{
			name: "node without addresses converts",
			node: testNode(),
			want: &policy.Node{Name: "node-a"},
		},
		{
			name: "InternalIP and ExternalIP addresses are split in order",
			node: testNode(
				nodeAddr(corev1.NodeInternalIP, "10.0.1.1"),
				nodeAddr(corev1.NodeExternalIP, "203.0.113.1"),
				nodeAddr(corev1.NodeInternalIP, "fd00:1::1"),
				nodeAddr(corev1.NodeExternalIP, "2001:db8::1"),
			),
			want: &policy.Node{
				Name:        "node-a",
				InternalIPs: addrs("10.0.1.1", "fd00:1::1"),
				ExternalIPs: addrs("203.0.113.1", "2001:db8::1"),
			},
		},
		{
			name: "Hostname, InternalDNS and ExternalDNS addresses are ignored unparsed",
			node: testNode(
				nodeAddr(corev1.NodeHostName, "node-a"),
				nodeAddr(corev1.NodeInternalDNS, "node-a.internal"),
				nodeAddr(corev1.NodeExternalDNS, "node-a.example.com"),
				nodeAddr(corev1.NodeInternalIP, "10.0.1.1"),
			),
			want: &policy.Node{Name: "node-a", InternalIPs: addrs("10.0.1.1")},
		},
		{
			name: "labels are passed through",
			node: func() *corev1.Node {
				n := testNode(nodeAddr(corev1.NodeInternalIP, "10.0.1.1"))
				n.Labels = map[string]string{policy.LabelTopologyZone: "zone-1", "kubernetes.io/hostname": "node-a"}
				return n
			}(),
			want: &policy.Node{
				Name:        "node-a",
				Labels:      map[string]string{policy.LabelTopologyZone: "zone-1", "kubernetes.io/hostname": "node-a"},
				InternalIPs: addrs("10.0.1.1"),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ws, err := checkedNode(t, tc.node)
			if err != nil || len(ws) > 0 {
				t.Fatalf("Node: unexpected error %v, warnings %v", err, ws)
			}
			if diff := cmp.Diff(tc.want, got, cmpOpts...); diff != "" {
				t.Errorf("Node mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeInvalid(t *testing.T) {
	_, ws, err := Node(&corev1.Node{})
	checkObjectError(t, err, policy.ErrInvalid, "Node ", "metadata.name")
	if ws != nil {
		t.Errorf("warnings %v with the error", ws)
	}
}

// TestNodeBadAddressIsSkipped: one unparsable address (the apiserver
// accepts a hostname as an ExternalIP) is skipped with a warning naming
// it; the Node and its other addresses are kept.
func TestNodeBadAddressIsSkipped(t *testing.T) {
	tests := []struct {
		name      string
		node      *corev1.Node
		wantInt   []netip.Addr
		wantExt   []netip.Addr
		wantField string
		wantMsg   string // exact warning when set
	}{
		{
			name:      "an invalid InternalIP is skipped, the other kept",
			node:      testNode(nodeAddr(corev1.NodeInternalIP, "10.0.1.1"), nodeAddr(corev1.NodeInternalIP, "bogus")),
			wantInt:   addrs("10.0.1.1"),
			wantField: "status.addresses[1].address",
		},
		{
			name: "a hostname as ExternalIP is skipped, the InternalIP kept",
			node: testNode(nodeAddr(corev1.NodeExternalIP, "node-a.example.com"), nodeAddr(corev1.NodeInternalIP, "10.0.1.1"),
				nodeAddr(corev1.NodeExternalIP, "203.0.113.1")),
			wantInt:   addrs("10.0.1.1"),
			wantExt:   addrs("203.0.113.1"),
			wantField: "status.addresses[0].address",
		},
		{
			name: "the index counts ignored address types",
			node: testNode(
				nodeAddr(corev1.NodeHostName, "node-a"),
				nodeAddr(corev1.NodeInternalIP, "fe80::1%eth0"),
			),
			wantField: "status.addresses[1].address",
			wantMsg:   `Node node-a: status.addresses[1].address: invalid IP: zoned address "fe80::1%eth0"; address skipped`,
		},
		{
			name:      "an IPv4-mapped IPv6 node address is skipped",
			node:      testNode(nodeAddr(corev1.NodeExternalIP, "::ffff:203.0.113.1")),
			wantField: "status.addresses[0].address",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ws, err := checkedNode(t, tc.node)
			if err != nil {
				t.Fatalf("Node: %v", err)
			}
			want := &policy.Node{Name: "node-a", InternalIPs: tc.wantInt, ExternalIPs: tc.wantExt}
			if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
				t.Errorf("Node (-want +got):\n%s", diff)
			}
			if len(ws) != 1 || ws[0].Object != "Node node-a" || ws[0].Field != tc.wantField {
				t.Fatalf("warnings %v, want one on %s", ws, tc.wantField)
			}
			if tc.wantMsg != "" && ws[0].String() != tc.wantMsg {
				t.Errorf("warning =\n  %s\nwant\n  %s", ws[0], tc.wantMsg)
			}
		})
	}
}
