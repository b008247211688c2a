//go:build !integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

// TestResidentMemoryAtScale loads 1,000 services and 10,000 endpoints
// through the API and fails if the proxy binary's resident memory (now
// and at its peak) once it has converged exceeds defaultMaxRSSMiB. It
// runs the real binary in --dry-run watch mode (the same informers,
// engine and loop; no kernel on the host) and is opt-in (it creates
// 2,000 objects): KIP_E2E_SCALE=1.
func TestResidentMemoryAtScale(t *testing.T) {
	if os.Getenv("KIP_E2E_SCALE") != "1" {
		t.Skip("set KIP_E2E_SCALE=1 to measure the proxy's memory at 1k services / 10k endpoints")
	}
	const services, perService = 1000, 10
	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	cfg := c.AdminConfig()
	cfg.QPS, cfg.Burst = 1000, 1000
	admin := kubernetes.NewForConfigOrDie(cfg)
	for i := 0; i < services; i++ {
		svc := webService()
		svc.Name, svc.Spec.ClusterIP = fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", 10+i/250, i%250+1)
		if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var eps []endpoint
		for j := 0; j < perService; j++ {
			eps = append(eps, endpoint{fmt.Sprintf("10.%d.%d.%d", 64+j, i/250, i%250+1), fmt.Sprintf("node-%d", j), "zone-a"})
		}
		s := webSlice(eps...)
		s.Name, s.Labels["kubernetes.io/service-name"] = svc.Name+"-abc12", svc.Name
		if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node(nodeName, "zone-a", "192.0.2.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "kube-ipvs-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kube-ipvs-proxy").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	metricsAddr := freeAddr(t)
	cmd := exec.Command(bin, "--dry-run", "--kubeconfig", c.Kubeconfig("admin"), "--hostname-override", nodeName,
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", "", "--ipvs-min-sync-period", "1s")
	cmd.Stdout, cmd.Stderr = nil, nil // the plans go to /dev/null
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	vsLine := regexp.MustCompile(`kube_ipvs_proxy_virtual_servers\{kind="ClusterIP"\} (\d+)`)
	start := time.Now()
	waitFor(t, "convergence", func() bool {
		code, body := getQuiet(metricsAddr)
		m := vsLine.FindStringSubmatch(body)
		return code == 200 && len(m) == 2 && m[1] == strconv.Itoa(services+1) // + the kubernetes Service
	})
	converged := time.Since(start)
	time.Sleep(2 * time.Second)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	limit := int64(defaultMaxRSSMiB)
	if v := os.Getenv("KIP_E2E_SCALE_MAX_RSS_MIB"); v != "" {
		if limit, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("KIP_E2E_SCALE_MAX_RSS_MIB: %v", err)
		}
	}
	found := 0
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || (f[0] != "VmRSS:" && f[0] != "VmHWM:") {
			continue
		}
		found++
		kib, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || f[2] != "kB" {
			t.Fatalf("/proc/%d/status: %q", cmd.Process.Pid, line)
		}
		t.Logf("%d services, %d endpoints: converged in %v; %s %d MiB (limit %d MiB)", services, services*perService,
			converged, f[0], kib>>10, limit)
		if kib>>10 > limit {
			t.Errorf("%s %d MiB at %d services / %d endpoints, want at most %d MiB", f[0], kib>>10, services,
				services*perService, limit)
		}
	}
	if found != 2 {
		t.Fatalf("/proc/%d/status lacks VmRSS or VmHWM", cmd.Process.Pid)
	}
}

// defaultMaxRSSMiB bounds the proxy's resident memory (current and peak)
// at 1k services / 10k endpoints: about twice the 52 MiB measured
// (VmRSS and VmHWM, Go 1.26, the 2-core dev host), so that a leak or a
// copy of every object fails it. KIP_E2E_SCALE_MAX_RSS_MIB overrides it.
const defaultMaxRSSMiB = 100
