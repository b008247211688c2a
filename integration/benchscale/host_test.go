//go:build !integration

package benchscale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/benchscale/results"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/vme2e"
)

// defaultScales are the service counts measured unless EnvServices says.
const defaultScales = "1000 10000"

// TestScale is make bench-scale: for each scale, an apiserver on the
// host loaded with the workload and a VM boot in which TestScaleInVM
// measures the proxy binaries. It prints one table per scale and writes
// them, with the raw runs as JSON, to .cache/bench-scale/.
func TestScale(t *testing.T) {
	if os.Getenv("KIP_BENCH_SCALE") != "1" {
		t.Skip("boots a VM for minutes: set KIP_BENCH_SCALE=1 (make bench-scale)")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	phases, err := PhasesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	scales := scalesFromEnv(t, defaultScales)
	out := outputDir(t, repo, scales)
	stamp := time.Now().UTC().Format("20060102-150405")
	bins, about := buildProxies(t, repo)
	rep := results.Report{Header: header(repo, phases, about)}
	for _, n := range scales {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			runs := measureScale(t, repo, filepath.Join(out, fmt.Sprintf("%s-%d.console.log", stamp, n)), Workload{Services: n}, phases, bins)
			rep.Scales = append(rep.Scales, results.Scale{Services: n, LoadAfter: loadAverage(), Runs: runs})
		})
	}
	base := filepath.Join(out, stamp)
	writeReport(t, base, markdown(rep), rep)
	t.Logf("results: %s.md and %s.json", base, base)
}

// scalesFromEnv is the numbers of services to measure: EnvServices, or
// def.
func scalesFromEnv(t *testing.T, def string) []int {
	t.Helper()
	var scales []int
	for _, f := range strings.Fields(envOr(EnvServices, def)) {
		n, err := strconv.Atoi(f)
		if err == nil {
			err = Workload{Services: n}.Validate()
		}
		if err != nil {
			t.Fatalf("%s: %q: %v", EnvServices, f, err)
		}
		scales = append(scales, n)
	}
	return scales
}

// outputDir makes .cache/bench-scale, where the reports and console logs
// go, and sizes the VM for the largest of scales (vmMemoryMiB) unless
// VMLAB_MEM says otherwise: one size for the whole run, which its header
// records.
func outputDir(t *testing.T, repo string, scales []int) string {
	t.Helper()
	if os.Getenv("VMLAB_MEM") == "" {
		t.Setenv("VMLAB_MEM", strconv.Itoa(vmMemoryMiB(slices.Max(scales))))
	}
	out := filepath.Join(repo, ".cache", "bench-scale")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// vmMemoryMiB is the VM's memory for a workload of services: 4 GiB up to
// 10,000, and 1 GiB more for each further 10,000 or part of it (the kernel's
// destinations, kube-proxy's heap and the harness's reads of
// /proc/net/ip_vs all grow with it): 8 GiB at 50,000.
func vmMemoryMiB(services int) int {
	const base, perTenThousand = 4096, 1024
	if services <= 10000 {
		return base
	}
	return base + (services-1)/10000*perTenThousand
}

// writeReport prints md and writes it to base.md, and rep as JSON to
// base.json.
func writeReport(t *testing.T, base, md string, rep results.Report) []byte {
	t.Helper()
	fmt.Println(md)
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".json", js, 0o644); err != nil {
		t.Fatal(err)
	}
	return js
}

// measureScale starts an apiserver, loads the workload and measures
// every binary in one VM boot; it returns the runs the VM reported.
func measureScale(t *testing.T, repo, consoleLog string, w Workload, phases Phases, bins []hostBin) []Run {
	runs := phases.Rounds * len(bins)
	// A generous bound; a run at 10,000 services takes about 10 minutes.
	perRun := 10*time.Minute + time.Duration(w.Services)*100*time.Millisecond + phases.Idle
	inVM := 5*time.Minute + time.Duration(runs)*perRun
	var files, specs []string
	for _, b := range bins {
		dst := "/bin/kip-proxy-" + b.label
		files = append(files, b.path+":"+dst)
		specs = append(specs, b.label+"="+dst)
	}
	env := append(phases.Env(), envVMServices+"="+strconv.Itoa(w.Services), envVMProxies+"="+strings.Join(specs, ","))
	console, got := runInVM(t, repo, consoleLog, w, inVM, files, env, "TestScaleInVM")
	profiles, err := ParseProfiles(console)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range profiles {
		kind := p.Kind
		if kind == "" {
			kind = "heap"
		}
		ext := kind + ".pprof"
		if kind == "trace" { // a Go execution trace: go tool trace
			ext = "trace"
		}
		path := fmt.Sprintf("%s-%s-%d-%s.%s", strings.TrimSuffix(consoleLog, ".console.log"), p.Proxy, p.Round+1, p.When, ext)
		if err := os.WriteFile(path, p.Pprof, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s profile: %s", kind, path)
	}
	if len(got) != runs {
		t.Fatalf("the VM reported %d runs, want %d", len(got), runs)
	}
	return got
}

// runInVM starts an apiserver on the host, loads w into it, and runs the
// VM half (the test named run) in one boot within inVM, with the
// config file, the proxy's kubeconfig and files (host:guest) copied in
// and env set; it returns the console and the runs the VM reported.
func runInVM(t *testing.T, repo, consoleLog string, w Workload, inVM time.Duration, files, env []string, run string) (string, []Run) {
	t.Helper()
	if os.Getenv("VMLAB_TIMEOUT") == "" {
		t.Setenv("VMLAB_TIMEOUT", strconv.Itoa(int(inVM/time.Second)))
	}
	if os.Getenv("VMLAB_LOG") == "" {
		t.Setenv("VMLAB_LOG", consoleLog)
	}
	opts := apiserver.Options{ExtraArgs: []string{
		fmt.Sprintf("--service-node-port-range=%d-%d", NodePortFirst, NodePortLast)}}
	var seed string
	if w.Services > seedAbove {
		// An apiserver holding this many objects (or starting from
		// them) takes minutes to be ready.
		opts.ReadyTimeout = 10 * time.Minute
		seed = seedPath(t, repo, w, opts)
		if _, err := os.Stat(seed); err == nil {
			opts.EtcdSeed = seed
		}
	}
	h := vme2e.StartHost(t, repo, opts)
	h.VMTimeout = inVM + 10*time.Minute // building the test binary, booting
	switch {
	case opts.EtcdSeed != "":
		checkSeeded(t, h.Cluster, w, seed)
	case seed != "":
		load(t, h.Cluster, w)
		saveSeed(t, h.Cluster, seed, w.Services)
	default:
		load(t, h.Cluster, w)
	}
	files = append([]string{daemonSetConfig(t, repo) + ":" + ConfigPath, h.ProxyKubeconfig + ":" + KubeconfigPath}, files...)
	console := h.RunVM(t, "./integration/benchscale/", files, env,
		"-test.v", "-test.run", "^"+run+"$", "-test.timeout", inVM.String())
	got, err := ParseRuns(console)
	if err != nil {
		t.Fatal(err)
	}
	return console, got
}

// load creates the workload through the API, as the controllers would:
// the namespaces, this node with its address, every Service and its
// EndpointSlice.
func load(t *testing.T, c *apiserver.Cluster, w Workload) {
	t.Helper()
	cfg := c.AdminConfig()
	cfg.QPS, cfg.Burst = 5000, 5000
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	start := time.Now()
	for i := range Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace(i)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := loadNode()
	node, err := cs.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status = want.Status
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	todo := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range todo {
				svc, s := w.Service(i), w.Slice(i, -1)
				_, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
				if err == nil {
					_, err = cs.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
				}
				if err != nil {
					select {
					case errs <- fmt.Errorf("service %d: %w", i, err):
					default:
					}
				}
			}
		})
	}
	for i := range w.Services {
		todo <- i
	}
	close(todo)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("loaded %d services and %d endpoints in %v", w.Services, w.Services*PerService, time.Since(start).Round(time.Millisecond))
}

// loadNode is the node load creates: this node, with its address.
func loadNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: map[string]string{"kubernetes.io/hostname": NodeName}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: GuestAddr}}}}
}

// daemonSetConfig writes deploy/base's config.conf with the workload's
// pod CIDR; its kubeconfig path is KubeconfigPath, as in the DaemonSet.
func daemonSetConfig(t *testing.T, repo string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "base", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatalf("deploy/base/configmap.yaml: %v", err)
	}
	conf := cm.Data["config.conf"]
	if !strings.Contains(conf, "__POD_CIDR__") || !strings.Contains(conf, KubeconfigPath) {
		t.Fatalf("deploy/base/configmap.yaml's config.conf lacks __POD_CIDR__ or %s:\n%s", KubeconfigPath, conf)
	}
	path := filepath.Join(t.TempDir(), "config.conf")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(conf, "__POD_CIDR__", ClusterCIDR)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func TestVMMemoryGrowsAGiBPerTenThousandServicesAbove10000(t *testing.T) {
	for _, c := range []struct{ services, want int }{
		{1000, 4096}, {10000, 4096}, {10001, 5120}, {20000, 5120}, {20001, 6144}, {50000, 8192},
	} {
		if got := vmMemoryMiB(c.services); got != c.want {
			t.Errorf("vmMemoryMiB(%d) = %d, want %d", c.services, got, c.want)
		}
	}
}
