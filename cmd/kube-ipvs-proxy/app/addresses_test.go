package app

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// addrNode is node-a, with one InternalIP, so that NodePorts are planned.
const addrNode = `apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {addresses: [{type: InternalIP, address: 192.168.0.1}]}
`

// addrService is a Service default/web on 10.96.0.5 (and fd00:96::5 when
// dual) with port http TCP 80 (NodePort 30080), its spec extended by
// extra and its status by status (both YAML, already indented).
func addrService(dual bool, extra, status string) string {
	ips := `[10.96.0.5]`
	if dual {
		ips = `[10.96.0.5, "fd00:96::5"]`
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  type: NodePort
  clusterIP: 10.96.0.5
  clusterIPs: %s
  ports: [{name: http, port: 80, nodePort: 30080}]
%sstatus:
%s`, ips, extra, status)
}

// planLines runs the dry run on node-a over the given files and returns
// its virtual servers as "kind address:port", sorted, and its stderr.
func planLines(t *testing.T, files ...string) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"--dry-run", "--hostname-override", "node-a", "--output", "json"}
	for i, content := range files {
		args = append(args, "--objects", writeFile(t, dir, fmt.Sprintf("objects-%d.yaml", i), content))
	}
	code, out, errOut := run(t, args...)
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	var plan struct {
		VirtualServers []struct {
			Kind, Address string
			Port          int
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("decode plan: %v", err)
	}
	var lines []string
	for _, vs := range plan.VirtualServers {
		addr := vs.Address
		if strings.Contains(addr, ":") {
			addr = "[" + addr + "]"
		}
		lines = append(lines, fmt.Sprintf("%s %s:%d", vs.Kind, addr, vs.Port))
	}
	slices.Sort(lines)
	return lines, errOut
}

// TestDryRunAddressesNormalised: a Service's addresses are planned as
// kube-proxy parses them, each once, and a bad one costs only itself.
func TestDryRunAddressesNormalised(t *testing.T) {
	base := []string{"ClusterIP 10.96.0.5:80", "NodePort 192.168.0.1:30080"}
	tests := []struct {
		name       string
		dual       bool
		extra      string // spec lines
		status     string // status lines
		want       []string
		wantStderr []string
		noStderr   []string
	}{
		{
			name:       "an externalIP listed twice is one virtual server",
			extra:      "  externalIPs: [192.0.2.1, 192.0.2.1]\n",
			want:       append([]string{"ExternalIP 192.0.2.1:80"}, base...),
			wantStderr: []string{"Service default/web: spec.externalIPs[1]: 192.0.2.1 is also spec.externalIPs[0]; served once"},
		},
		{
			name:       "one IPv6 address written two ways is one virtual server",
			dual:       true,
			extra:      "  externalIPs: [\"2001:db8::1\", \"2001:DB8:0:0::1\"]\n",
			want:       append([]string{"ClusterIP [fd00:96::5]:80", "ExternalIP [2001:db8::1]:80"}, base...),
			wantStderr: []string{"spec.externalIPs[1]: 2001:db8::1 is also spec.externalIPs[0]"},
		},
		{
			name:       "an externalIP equal to its own LB IP is one virtual server, the LoadBalancer",
			extra:      "  type: LoadBalancer\n  externalIPs: [198.51.100.1]\n",
			status:     "  loadBalancer: {ingress: [{ip: 198.51.100.1}]}\n",
			want:       append([]string{"LoadBalancer 198.51.100.1:80"}, base...),
			wantStderr: []string{"spec.externalIPs[0]: 198.51.100.1 is also status.loadBalancer.ingress[0].ip; served once"},
		},
		{
			name:     "a leading-zero IPv4 externalIP is served as the decimal address",
			extra:    "  externalIPs: [192.000.002.010]\n",
			want:     append([]string{"ExternalIP 192.0.2.10:80"}, base...),
			noStderr: []string{"spec.externalIPs"},
		},
		{
			name:     "an IPv4-mapped IPv6 externalIP is served as its IPv4 address",
			extra:    "  externalIPs: [\"::ffff:192.0.2.11\"]\n",
			want:     append([]string{"ExternalIP 192.0.2.11:80"}, base...),
			noStderr: []string{"spec.externalIPs"},
		},
		{
			name:  "a malformed externalIP beside good ones drops itself only: ClusterIP and NodePort served",
			extra: "  externalIPs: [192.0.2.1, 192.0.2.300, 192.0.2.2]\n",
			want:  append([]string{"ExternalIP 192.0.2.1:80", "ExternalIP 192.0.2.2:80"}, base...),
			wantStderr: []string{`Service default/web: spec.externalIPs[1]: invalid IP: "192.0.2.300" is not an IP address; ` +
				"this address left out, the Service's others served"},
			noStderr: []string{"skipped"},
		},
		{
			name:   "a malformed LB IP and source range drop themselves only",
			extra:  "  type: LoadBalancer\n  loadBalancerSourceRanges: [\"203.0.113.0/24\", \"nope\"]\n",
			status: "  loadBalancer: {ingress: [{ip: 198.51.100.1}, {ip: \"198.51.100.x\"}]}\n",
			want:   append([]string{"LoadBalancer 198.51.100.1:80"}, base...),
			wantStderr: []string{`status.loadBalancer.ingress[1].ip: invalid IP: "198.51.100.x" is not an IP address`,
				`spec.loadBalancerSourceRanges[1]: invalid CIDR: "nope" is not a CIDR`},
			noStderr: []string{"skipped"},
		},
		{
			name:   "a malformed source range leaving none of its family fails closed: the LB IP is not served",
			extra:  "  type: LoadBalancer\n  loadBalancerSourceRanges: [\"nope\"]\n",
			status: "  loadBalancer: {ingress: [{ip: 198.51.100.1}]}\n",
			want:   base,
			wantStderr: []string{"status.loadBalancer.ingress[0].ip: 198.51.100.1 not served: spec.loadBalancerSourceRanges has an invalid entry " +
				"and no valid IPv4 one, so it is served to no client rather than to every client"},
		},
		{
			name:  "loopback, link-local, multicast, unspecified and broadcast externalIPs are refused",
			dual:  true,
			extra: "  externalIPs: [127.0.0.1, \"::1\", 169.254.169.254, \"fe80::1\", 224.0.0.1, \"ff02::1\", 0.0.0.0, \"::\", 255.255.255.255, 192.0.2.1]\n",
			want:  append([]string{"ClusterIP [fd00:96::5]:80", "ExternalIP 192.0.2.1:80"}, base...),
			wantStderr: []string{
				"spec.externalIPs[0]: 127.0.0.1 is a loopback address, which no Service may take; not served",
				"spec.externalIPs[1]: ::1 is a loopback address", "spec.externalIPs[2]: 169.254.169.254 is a link-local address",
				"spec.externalIPs[3]: fe80::1 is a link-local address", "spec.externalIPs[4]: 224.0.0.1 is a multicast address",
				"spec.externalIPs[5]: ff02::1 is a multicast address", "spec.externalIPs[6]: 0.0.0.0 is the unspecified address",
				"spec.externalIPs[7]: :: is the unspecified address", "spec.externalIPs[8]: 255.255.255.255 is the broadcast address",
			},
		},
		{
			name:   "loopback and link-local LB status IPs are refused, however written",
			extra:  "  type: LoadBalancer\n",
			status: "  loadBalancer: {ingress: [{ip: 127.0.0.1}, {ip: \"::ffff:127.0.0.1\"}, {ip: 0127.0.0.1}, {ip: 169.254.169.254}, {ip: 198.51.100.1}]}\n",
			want:   append([]string{"LoadBalancer 198.51.100.1:80"}, base...),
			wantStderr: []string{
				"status.loadBalancer.ingress[0].ip: 127.0.0.1 is a loopback address, which no Service may take; not served",
				"status.loadBalancer.ingress[1].ip: 127.0.0.1 is a loopback address",
				"status.loadBalancer.ingress[2].ip: 127.0.0.1 is a loopback address",
				"status.loadBalancer.ingress[3].ip: 169.254.169.254 is a link-local address",
			},
		},
		{
			name:       "an externalIP of a family the Service has no ClusterIP of is warned",
			extra:      "  externalIPs: [\"2001:db8::1\"]\n",
			want:       base,
			wantStderr: []string{"spec.externalIPs: 2001:db8::1 is IPv6 and the Service has no IPv6 ClusterIP; not served"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, errOut := planLines(t, addrNode, addrService(tc.dual, tc.extra, tc.status))
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("virtual servers\n got %q\nwant %q\nstderr:\n%s", got, want, errOut)
			}
			for _, s := range tc.wantStderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			for _, s := range tc.noStderr {
				if strings.Contains(errOut, s) {
					t.Errorf("stderr has %q:\n%s", s, errOut)
				}
			}
		})
	}
}

// TestDryRunRefusedEndpointsLeftOut: endpoints on addresses no Service
// may take are left out, the slice's others kept, with one warning per
// slice and reason.
func TestDryRunRefusedEndpointsLeftOut(t *testing.T) {
	slice := `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [127.0.0.1]}, {addresses: [127.0.0.2]}, {addresses: [169.254.169.254]}, {addresses: [224.0.0.9]},
  {addresses: [255.255.255.255]}, {addresses: [0.0.0.0]}, {addresses: [10.244.0.7]}]
`
	dir := t.TempDir()
	code, out, errOut := run(t, "--dry-run", "--hostname-override", "node-a", "--output", "json",
		"--objects", writeFile(t, dir, "objects.yaml", addrNode+"---\n"+addrService(false, "", "")+"---\n"+slice))
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	var plan struct {
		VirtualServers []struct {
			Destinations []struct{ Address string }
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.VirtualServers) == 0 {
		t.Fatalf("decode plan: %v (%d virtual servers)", err, len(plan.VirtualServers))
	}
	for _, vs := range plan.VirtualServers {
		if len(vs.Destinations) != 1 || vs.Destinations[0].Address != "10.244.0.7" {
			t.Errorf("destinations %v, want 10.244.0.7 only", vs.Destinations)
		}
	}
	for _, s := range []string{
		"EndpointSlice default/web-1: endpoints[0].addresses[0]: 127.0.0.1 is a loopback address, which no Service may take; endpoint left out, and 1 more of this slice's for being a loopback address",
		"EndpointSlice default/web-1: endpoints[2].addresses[0]: 169.254.169.254 is a link-local address",
		"EndpointSlice default/web-1: endpoints[3].addresses[0]: 224.0.0.9 is a multicast address",
		"EndpointSlice default/web-1: endpoints[4].addresses[0]: 255.255.255.255 is the broadcast address",
		"EndpointSlice default/web-1: endpoints[5].addresses[0]: 0.0.0.0 is the unspecified address",
	} {
		if strings.Count(errOut, s) != 1 {
			t.Errorf("stderr has %q %d times, want once:\n%s", s, strings.Count(errOut, s), errOut)
		}
	}
	if n := strings.Count(errOut, "is a loopback address"); n != 1 {
		t.Errorf("%d loopback warnings, want one for the slice:\n%s", n, errOut)
	}
}
