package app

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/golden"
)

// exampleClusterCIDR is the pod network of examples/.
const exampleClusterCIDR = "10.244.0.0/16,fd00:244::/32"

// run executes the command line the way main does and returns the exit
// code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	opts, err := ParseFlags(args, &stderr)
	if err == nil {
		err = opts.Validate()
	}
	if err != nil {
		return ExitUsage, "", err.Error()
	}
	code := Run(t.Context(), opts, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestExamplesGolden: every plan in examples/plans is what the dry-run
// prints for examples/ on that node, and the examples load without
// warnings.
func TestExamplesGolden(t *testing.T) {
	examples := filepath.Join("..", "..", "..", "examples")
	tests := []struct {
		node, output, golden string
		args                 []string
	}{
		{"node-a", "json", "node-a.json", nil},
		{"node-a", "text", "node-a.txt", nil},
		{"node-b", "json", "node-b.json", nil},
		{"node-c", "json", "node-c.json", nil},
		// The table tells pods by interface: iifname where node-a.txt has
		// @cluster-cidrs.
		{"node-a", "text", "node-a-bridge.txt", []string{"--detect-local-mode", "BridgeInterface", "--pod-bridge-interface", "cni0"}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"--dry-run", "--objects", examples, "--hostname-override", tc.node, "--output", tc.output,
				"--cluster-cidr", exampleClusterCIDR}, tc.args...)...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			golden.Check(t, filepath.Join(examples, "plans", tc.golden), out)
		})
	}
}

// TestJSONContract pins the field names of the --output json contract.
func TestJSONContract(t *testing.T) {
	code, out, _ := run(t, "--dry-run", "--objects", filepath.Join("..", "..", "..", "examples"), "--hostname-override", "node-a")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	var plan struct {
		Node           *string `json:"node"`
		VirtualServers []map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Node == nil || len(plan.VirtualServers) == 0 {
		t.Fatalf("decode plan: %v, node %v, %d virtual servers", err, plan.Node, len(plan.VirtualServers))
	}
	for _, vs := range plan.VirtualServers {
		for _, field := range []string{"service", "portName", "kind", "address", "port", "protocol", "scheduler",
			"persistenceTimeoutSeconds", "destinations", "reason"} {
			if _, ok := vs[field]; !ok {
				t.Fatalf("virtual server lacks %q: %v", field, vs)
			}
		}
		var dests []map[string]json.RawMessage
		if err := json.Unmarshal(vs["destinations"], &dests); err != nil {
			t.Fatalf("destinations is not a list: %s", vs["destinations"])
		}
		for _, d := range dests {
			for _, field := range []string{"address", "port", "weight"} {
				if _, ok := d[field]; !ok {
					t.Fatalf("destination lacks %q: %v", field, d)
				}
			}
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodService = `apiVersion: v1
kind: Service
metadata: {name: good, namespace: default}
spec:
  clusterIP: 10.96.0.5
  ports: [{name: http, port: 80}]
`

func TestDryRunBadInput(t *testing.T) {
	tests := []struct {
		name       string
		files      map[string]string
		wantCode   int
		wantStderr []string // substrings
		wantInPlan []string // substrings of stdout
	}{
		{
			name:       "malformed YAML exits 2 with file: line: what",
			files:      map[string]string{"bad.yaml": goodService + "---\nkind: Service\nmetadata:\n  name: x\n   bad: indent\n"},
			wantCode:   ExitUsage,
			wantStderr: []string{"bad.yaml: 11: "},
		},
		{
			name:       "a missing file exits 2 naming it",
			files:      map[string]string{},
			wantCode:   ExitUsage,
			wantStderr: []string{"missing.yaml: no such file or directory"},
		},
		{
			name: "an invalid IP skips that object only, with a warning naming it and the field",
			files: map[string]string{"svc.yaml": goodService + `---
apiVersion: v1
kind: Service
metadata: {name: broken, namespace: shop}
spec:
  clusterIP: 10.96.0.300
  ports: [{name: http, port: 80}]
`},
			wantCode:   ExitOK,
			wantStderr: []string{"svc.yaml:8: Service shop/broken: spec.clusterIPs[0]: invalid IP"},
			wantInPlan: []string{`"service": "default/good"`},
		},
		{
			name: "an invalid port skips that object only",
			files: map[string]string{"svc.yaml": goodService + `---
apiVersion: v1
kind: Service
metadata: {name: broken, namespace: shop}
spec:
  clusterIP: 10.96.0.6
  ports: [{name: http, port: 70000}]
`},
			wantCode:   ExitOK,
			wantStderr: []string{"svc.yaml:8: Service shop/broken: spec.ports[0].port: must be 1-65535, got 70000; skipped"},
			wantInPlan: []string{`"service": "default/good"`},
		},
		{
			name: "an endpoint address of the wrong family is left out; the slice keeps its valid endpoints",
			files: map[string]string{"svc.yaml": goodService + `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: good-1, namespace: default, labels: {kubernetes.io/service-name: good}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: ["fd00::1"]}, {addresses: ["10.244.0.7"]}]
`},
			wantCode: ExitOK,
			wantStderr: []string{"svc.yaml:8: EndpointSlice default/good-1: endpoints[0].addresses[0]: fd00::1 is not an IPv4 address; " +
				"endpoint left out, the slice's others kept"},
			wantInPlan: []string{`"address": "10.244.0.7"`},
		},
		{
			name:       "an invalid sessionAffinity skips the service, naming the value",
			files:      map[string]string{"svc.yaml": goodService + "  sessionAffinity: Sticky\n"},
			wantCode:   ExitOK,
			wantStderr: []string{`svc.yaml:1: Service default/good: spec.sessionAffinity: must be None or ClientIP, got "Sticky"; skipped`},
		},
		{
			name:       "an invalid internalTrafficPolicy skips the service, naming the value",
			files:      map[string]string{"svc.yaml": goodService + "  internalTrafficPolicy: Sideways\n"},
			wantCode:   ExitOK,
			wantStderr: []string{`svc.yaml:1: Service default/good: spec.internalTrafficPolicy: must be Cluster or Local, got "Sideways"; skipped`},
		},
		{
			name:       "a misspelt kind warns with file:line and the object",
			files:      map[string]string{"svc.yaml": strings.Replace(goodService, "kind: Service", "kind: Servcie", 1)},
			wantCode:   ExitOK,
			wantStderr: []string{"svc.yaml:1: Servcie default/good: kind Servcie is not a built-in Kubernetes kind (Service?); skipped"},
		},
		{
			name:       "an empty file warns",
			files:      map[string]string{"empty.yaml": ""},
			wantCode:   ExitOK,
			wantStderr: []string{"empty.yaml:1: no Kubernetes object in this file"},
		},
		{
			name: "--hostname-override naming no Node warns, naming the Nodes given",
			files: map[string]string{"nodes.yaml": `apiVersion: v1
kind: Node
metadata: {name: node-b}
`},
			wantCode:   ExitOK,
			wantStderr: []string{"--hostname-override node-a: no valid Node of that name in --objects (the Nodes given are node-b)"},
		},
		{
			name:       "an unknown annotation warns and the service is still planned",
			files:      map[string]string{"svc.yaml": strings.Replace(goodService, "namespace: default}", "namespace: default, annotations: {kube-ipvs-proxy.io/shceduler: wrr}}", 1)},
			wantCode:   ExitOK,
			wantStderr: []string{"svc.yaml:1: Service default/good: metadata.annotations[kube-ipvs-proxy.io/shceduler]: unknown annotation; ignored"},
			wantInPlan: []string{`"service": "default/good"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--dry-run", "--hostname-override", "node-a"}
			for name, content := range tc.files {
				args = append(args, "--objects", writeFile(t, dir, name, content))
			}
			if len(tc.files) == 0 {
				args = append(args, "--objects", filepath.Join(dir, "missing.yaml"))
			}
			code, out, errOut := run(t, args...)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, errOut)
			}
			for _, s := range tc.wantStderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			for _, s := range tc.wantInPlan {
				if !strings.Contains(out, s) {
					t.Errorf("plan lacks %q:\n%s", s, out)
				}
			}
		})
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown output format", []string{"--dry-run", "--objects", "x", "--output", "yaml"}, "--output must be json or text"},
		{"not a scheduler name", []string{"--dry-run", "--objects", "x", "--ipvs-scheduler", "round robin"}, `"round robin" is not an IPVS scheduler name`},
		{"objects without dry-run", []string{"--objects", "x"}, "--objects needs --dry-run"},
		{"bad cluster CIDR", []string{"--dry-run", "--objects", "x", "--cluster-cidr", "10.244.0.0"}, "invalid cluster CIDR"},
		{"bad notrack service", []string{"--dry-run", "--objects", "x", "--notrack-services", "kube-dns"}, `"kube-dns" is not namespace/name`},
		{"bad nodeport CIDR", []string{"--dry-run", "--objects", "x", "--nodeport-addresses", "10.0.0.0/33"}, "invalid nodeport address"},
		{"unknown flag", []string{"--bogus"}, "unknown flag: --bogus"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, append(tc.args, "--hostname-override", "n")...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d stderr %q, want %d and %q", code, errOut, ExitUsage, tc.want)
			}
		})
	}
}

// TestJSONExplainsSkippedAndLeftOut: --output json says what the text
// output says beside the plan: each Service not proxied and why, and
// each endpoint a virtual server of the plan leaves out, with the rule.
func TestJSONExplainsSkippedAndLeftOut(t *testing.T) {
	code, out, _ := run(t, "--dry-run", "--objects", filepath.Join("..", "..", "..", "examples"), "--hostname-override", "node-a",
		"--cluster-cidr", exampleClusterCIDR)
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		VirtualServers []struct {
			Address  string `json:"address"`
			Port     int    `json:"port"`
			Protocol string `json:"protocol"`
		} `json:"virtualServers"`
		Skipped []string `json:"skipped"`
		LeftOut []struct {
			VirtualServer, Service, Endpoint, Rule string
		} `json:"leftOut"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, vs := range doc.VirtualServers {
		keys[net.JoinHostPort(vs.Address, strconv.Itoa(vs.Port))+"/"+vs.Protocol] = true
	}
	tests := []struct {
		name string
		ok   func() bool
	}{
		{"a headless Service is skipped, with why", func() bool { return slices.Contains(doc.Skipped, "Service shop/db: headless (clusterIP None)") }},
		{"an ExternalName Service is skipped, with why", func() bool { return slices.Contains(doc.Skipped, "Service shop/payments: type ExternalName") }},
		{"another proxy's Service is skipped, with why", func() bool {
			return slices.Contains(doc.Skipped, "Service shop/mesh-gateway: labelled service.kubernetes.io/service-proxy-name=other-proxy")
		}},
		{"a serving-terminating endpoint left out while others are ready is listed", func() bool {
			return slices.ContainsFunc(doc.LeftOut, func(l struct{ VirtualServer, Service, Endpoint, Rule string }) bool {
				return l.VirtualServer == "10.96.0.10:53/UDP" && l.Endpoint == "10.244.4.10:53" && strings.HasPrefix(l.Rule, "serving-terminating")
			})
		}},
		{"every left-out entry names a virtual server of the plan, its service, endpoint and rule", func() bool {
			return len(doc.LeftOut) > 0 && !slices.ContainsFunc(doc.LeftOut, func(l struct{ VirtualServer, Service, Endpoint, Rule string }) bool {
				return !keys[l.VirtualServer] || l.Service == "" || l.Endpoint == "" || l.Rule == ""
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok() {
				t.Errorf("skipped %q\nleftOut %+v", doc.Skipped, doc.LeftOut)
			}
		})
	}
}
