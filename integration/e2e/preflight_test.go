//go:build !integration

package e2e

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
)

// TestPreflightAgainstARealAPIServer: `--preflight --kubeconfig` lists a
// real kube-apiserver's objects once and reports, for node-a, the Service
// over its budget (an error: exit 1), the ownership loser and the
// eTP=Local Service without a local endpoint (warnings); a node's kernel
// with IPVS loaded passes its checks.
func TestPreflightAgainstARealAPIServer(t *testing.T) {
	c, admin := startWithWeb(t)
	ctx := context.Background()
	if _, err := admin.CoreV1().Nodes().Create(ctx, node("node-b", "zone-b", "192.0.2.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	external := func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.7"} }
	svcs := []*corev1.Service{
		tcpService("default", "owner", "10.96.0.21", 8080, external),
		tcpService("default", "second", "10.96.0.22", 8080, external),
		tcpService("default", "wide", "10.96.0.23", 80, func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "q", Protocol: corev1.ProtocolTCP, Port: 81},
				corev1.ServicePort{Name: "r", Protocol: corev1.ProtocolTCP, Port: 82})
		}),
		tcpService("default", "local", "10.96.0.24", 80, func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}),
	}
	for _, s := range svcs {
		if _, err := admin.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "local-abc12", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "local"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("p"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.9"}, NodeName: ptr("node-b"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	opts, err := app.ParseFlags([]string{"--preflight", "--kubeconfig", c.Kubeconfig(apiserver.AdminUser),
		"--hostname-override", nodeName, "--max-virtual-servers-per-service", "2"}, &stderr)
	if err == nil {
		err = opts.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := fstest.MapFile{Mode: fs.ModeDir | 0o555}
	node := fstest.MapFS{"proc/sys/kernel/osrelease": {Data: []byte("6.1.0-lab\n")}, "proc/sys/kernel/hostname": {Data: []byte(nodeName + "\n")},
		"sys/module/ip_vs": &dir, "sys/module/ip_vs_rr": &dir, "sys/module/nf_tables": &dir, "sys/module/nf_conntrack": &dir}
	code := app.Preflight(ctx, opts, node, noForwardDrops{}, &stdout, &stderr)
	out := stdout.String()
	t.Logf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	if code != app.ExitError {
		t.Errorf("exit %d, want %d for the Service over its budget", code, app.ExitError)
	}
	for _, want := range []string{
		"preflight for node node-a: 6 Services",
		"ERROR   Service default/wide: spec: 3 ports on 1 ClusterIPs",
		"warning Service default/second: spec.ports[p]: ExternalIP virtual server 203.0.113.7:8080/TCP is owned by Service default/owner",
		"warning Service default/local: eTP=Local, no local endpoint on this node (1 elsewhere)",
		"info    kernel: ip_vs loaded",
		"preflight FAIL: 1 errors, 2 warnings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// noForwardDrops is a node whose FORWARD drops nothing by policy.
type noForwardDrops struct{}

func (noForwardDrops) NFTForwardDrops() ([]nft.ForwardDrop, error) { return nil, nil }
func (noForwardDrops) LegacyForwardPolicy(bool) (string, error)    { return "ACCEPT", nil }
