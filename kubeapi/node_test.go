package kubeapi

import (
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
			got, err := Node(tc.node)
			if err != nil {
				t.Fatalf("Node: unexpected error %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpOpts...); diff != "" {
				t.Errorf("Node mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeInvalid(t *testing.T) {
	tests := []struct {
		name      string
		node      *corev1.Node
		wantObj   string
		wantField string
		wantErr   string // exact message when set
	}{
		{
			name:      "empty name is invalid",
			node:      &corev1.Node{},
			wantObj:   "Node ",
			wantField: "metadata.name",
		},
		{
			name:      "invalid InternalIP names its index",
			node:      testNode(nodeAddr(corev1.NodeInternalIP, "10.0.1.1"), nodeAddr(corev1.NodeInternalIP, "bogus")),
			wantField: "status.addresses[1].address",
		},
		{
			name:      "invalid ExternalIP is invalid",
			node:      testNode(nodeAddr(corev1.NodeExternalIP, "")),
			wantField: "status.addresses[0].address",
		},
		{
			name: "address index counts ignored address types",
			node: testNode(
				nodeAddr(corev1.NodeHostName, "node-a"),
				nodeAddr(corev1.NodeInternalIP, "fe80::1%eth0"),
			),
			wantField: "status.addresses[1].address",
			wantErr:   `Node node-a: status.addresses[1].address: invalid IP: zoned address "fe80::1%eth0"`,
		},
		{
			name:      "IPv4-mapped IPv6 node address is refused",
			node:      testNode(nodeAddr(corev1.NodeExternalIP, "::ffff:203.0.113.1")),
			wantField: "status.addresses[0].address",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.wantObj
			if obj == "" {
				obj = "Node node-a"
			}
			got, err := Node(tc.node)
			checkObjectError(t, err, policy.ErrInvalid, obj, tc.wantField)
			if got != nil {
				t.Errorf("got node %+v with error", got)
			}
			if tc.wantErr != "" && err.Error() != tc.wantErr {
				t.Errorf("error =\n  %s\nwant\n  %s", err, tc.wantErr)
			}
		})
	}
}
