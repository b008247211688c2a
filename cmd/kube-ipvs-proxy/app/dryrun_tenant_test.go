package app

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// tenantNode is node-a with one address.
const tenantNode = `apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {addresses: [{type: InternalIP, address: 192.168.0.10}]}
`

// dryRunPlan runs the dry run on the files as node-a and decodes its
// JSON plan.
func dryRunPlan(t *testing.T, files map[string]string, args ...string) (policy.Plan, string) {
	t.Helper()
	dir := t.TempDir()
	args = append([]string{"--dry-run", "--hostname-override", "node-a", "--output", "json"}, args...)
	for name, content := range files {
		args = append(args, "--objects", writeFile(t, dir, name, content))
	}
	code, out, errOut := run(t, args...)
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	var plan policy.Plan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("decode the plan: %v\n%s", err, out)
	}
	return plan, errOut
}

// servedOn counts the plan's virtual servers of a service, by kind.
func servedOn(p policy.Plan, svc string) map[policy.Kind]int {
	out := map[policy.Kind]int{}
	for _, vs := range p.VirtualServers {
		if vs.Service.String() == svc {
			out[vs.Kind]++
		}
	}
	return out
}

// TestDryRunOwnershipAndNoTrackWhateverTheServicesState: a ClusterIP is
// owned by its Service whatever this proxy makes of it, and NOTRACK is
// refused where a Service this proxy does not serve shares the endpoint.
func TestDryRunOwnershipAndNoTrackWhateverTheServicesState(t *testing.T) {
	const theirs = `apiVersion: v1
kind: Service
metadata: {name: theirs, namespace: team-b, labels: {service.kubernetes.io/service-proxy-name: other-proxy}}
spec:
  clusterIP: 10.96.0.40
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: theirs-1, namespace: team-b, labels: {kubernetes.io/service-name: theirs}}
addressType: IPv4
ports: [{name: dns, port: 53, protocol: UDP}]
endpoints: [{addresses: ["10.244.1.6"]}]
`
	for _, tc := range []struct {
		name    string
		files   map[string]string
		svc     string
		want    map[policy.Kind]int
		wantErr string // a warning on stderr
		noTrack bool
	}{
		{name: "an external IP equal to another proxy's Service's ClusterIP is refused",
			files: map[string]string{"node.yaml": tenantNode, "theirs.yaml": theirs, "grab.yaml": `apiVersion: v1
kind: Service
metadata: {name: grab, namespace: default}
spec:
  clusterIP: 10.96.0.99
  externalIPs: [10.96.0.40]
  ports: [{name: http, port: 8080}]
`},
			svc: "default/grab", want: map[policy.Kind]int{policy.KindClusterIP: 1},
			wantErr: "Service default/grab: spec.externalIPs: 10.96.0.40 is the ClusterIP of Service team-b/theirs, which owns it on every port; not served here"},
		{name: "an external IP equal to an invalid Service's ClusterIP is refused",
			files: map[string]string{"node.yaml": tenantNode, "bad.yaml": `apiVersion: v1
kind: Service
metadata: {name: bad, namespace: team-b}
spec:
  clusterIP: 10.96.0.41
  sessionAffinity: Sticky
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: grab, namespace: default}
spec:
  clusterIP: 10.96.0.99
  externalIPs: [10.96.0.41]
  ports: [{name: http, port: 8080}]
`},
			svc: "default/grab", want: map[policy.Kind]int{policy.KindClusterIP: 1},
			wantErr: "10.96.0.41 is the ClusterIP of Service team-b/bad, which owns it on every port; not served here"},
		{name: "NOTRACK is refused where another proxy's tracked Service shares the endpoint",
			files: map[string]string{"node.yaml": tenantNode, "theirs.yaml": theirs, "dns.yaml": `apiVersion: v1
kind: Service
metadata: {name: dns, namespace: default, annotations: {kube-ipvs-proxy.io/notrack: "true"}}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dns-1, namespace: default, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
ports: [{name: dns, port: 53, protocol: UDP}]
endpoints: [{addresses: ["10.244.1.5"]}, {addresses: ["10.244.1.6"]}]
`},
			svc: "default/dns", want: map[policy.Kind]int{policy.KindClusterIP: 1},
			wantErr: "Service default/dns: metadata.annotations[kube-ipvs-proxy.io/notrack]: endpoint 10.244.1.6:53/UDP of this Service is also an endpoint of Service team-b/theirs, " +
				"which this proxy does not serve (another proxy's, headless or invalid) and whose traffic is tracked: NOTRACK is not applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, errOut := dryRunPlan(t, tc.files, "--cluster-cidr", "10.244.0.0/16")
			if got := servedOn(plan, tc.svc); !equalCounts(got, tc.want) {
				t.Errorf("%s's virtual servers by kind: %v, want %v", tc.svc, got, tc.want)
			}
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErr, errOut)
			}
			for _, vs := range plan.VirtualServers {
				if vs.Service.String() == tc.svc && vs.NoTrack != tc.noTrack {
					t.Errorf("%s NOTRACK %v, want %v", vs.Key(), vs.NoTrack, tc.noTrack)
				}
			}
		})
	}
}

func equalCounts(a, b map[policy.Kind]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// wideService renders a Service of ports ports (protocol proto, node
// ports from 30000 when nodePorts) with the given extra spec and status
// lines.
func wideService(name string, ports int, proto string, nodePorts bool, spec, status string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: default}\nspec:\n%s  ports:\n", name, spec)
	for i := range ports {
		fmt.Fprintf(&b, "  - {name: p%d, port: %d, protocol: %s", i, 10000+i, proto)
		if nodePorts {
			fmt.Fprintf(&b, ", nodePort: %d", 30000+i)
		}
		b.WriteString("}\n")
	}
	b.WriteString(status)
	return b.String()
}

// externalIPList renders n external IPs as a YAML flow list.
func externalIPList(n int) string {
	ips := make([]string, n)
	for i := range ips {
		ips[i] = fmt.Sprintf("198.18.%d.%d", i/256, i%256)
	}
	return "[" + strings.Join(ips, ", ") + "]"
}

// TestDryRunDefaultBudgetServesWhatKubeProxyServes: with the default
// per-Service budget, the Services kube-proxy serves in practice are
// served whole, and an editor's 1,000 ports × 10,000 external IPs is
// refused from arithmetic on its spec, quickly, before anything is
// expanded.
func TestDryRunDefaultBudgetServesWhatKubeProxyServes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		svc     string
		want    map[policy.Kind]int
		wantErr string
	}{
		{name: "a dual-stack Service of 600 UDP ports",
			svc: wideService("voip", 600, "UDP", false,
				"  ipFamilyPolicy: RequireDualStack\n  clusterIP: 10.96.0.20\n  clusterIPs: [10.96.0.20, \"fd00:96::20\"]\n", ""),
			want: map[policy.Kind]int{policy.KindClusterIP: 1200}},
		{name: "10 ports × 100 external IPs",
			svc:  wideService("wide", 10, "TCP", false, "  clusterIP: 10.96.0.21\n  externalIPs: "+externalIPList(100)+"\n", ""),
			want: map[policy.Kind]int{policy.KindClusterIP: 10, policy.KindExternalIP: 1000}},
		{name: "a dual-stack LoadBalancer of 600 ports",
			svc: wideService("lb", 600, "TCP", true,
				"  type: LoadBalancer\n  ipFamilyPolicy: RequireDualStack\n  clusterIP: 10.96.0.22\n  clusterIPs: [10.96.0.22, \"fd00:96::22\"]\n",
				"status: {loadBalancer: {ingress: [{ip: 203.0.113.22}, {ip: \"2001:db8::22\"}]}}\n"),
			want: map[policy.Kind]int{policy.KindClusterIP: 1200, policy.KindNodePort: 600, policy.KindLoadBalancer: 1200}},
		{name: "1,000 ports × 10,000 external IPs is refused",
			svc:  wideService("huge", 1000, "TCP", false, "  clusterIP: 10.96.0.23\n  externalIPs: "+externalIPList(10000)+"\n", ""),
			want: map[policy.Kind]int{},
			wantErr: "Service default/huge: spec: 1000 ports on 1 ClusterIPs, 10000 external and 0 load-balancer IPs make 10001000 virtual servers, " +
				"over the limit of 10000 per Service (--max-virtual-servers-per-service, maxVirtualServersPerService); not served"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			plan, errOut := dryRunPlan(t, map[string]string{"node.yaml": tenantNode, "svc.yaml": tc.svc})
			took := time.Since(start)
			svc := "default/" + strings.SplitN(strings.SplitN(tc.svc, "name: ", 2)[1], ",", 2)[0]
			if got := servedOn(plan, svc); !equalCounts(got, tc.want) {
				t.Errorf("%s's virtual servers by kind: %v, want %v", svc, got, tc.want)
			}
			if tc.wantErr != "" && !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErr, errOut)
			}
			if tc.wantErr == "" && strings.Contains(errOut, "over the limit of") {
				t.Errorf("refused:\n%s", errOut)
			}
			if took > 10*time.Second {
				t.Errorf("the dry run took %v: the budget must refuse before expanding", took)
			}
			t.Logf("%s: %d virtual servers planned in %v", svc, len(plan.VirtualServers), took.Round(time.Millisecond))
		})
	}
}
