//go:build !integration

package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

// The scale test's knobs.
const (
	envScale      = "KIP_E2E_SCALE"                // 1 runs TestResidentMemoryAtScale
	envServices   = "KIP_E2E_SCALE_SERVICES"       // services; default 1000
	envPerService = "KIP_E2E_SCALE_ENDPOINTS"      // endpoints per service; default 10
	envMaxRSS     = "KIP_E2E_SCALE_MAX_RSS_MIB"    // the limit; default defaultMaxRSSMiB
	envBinary     = "KIP_E2E_SCALE_BIN"            // a prebuilt proxy binary (to compare builds)
	envConverge   = "KIP_E2E_SCALE_CONVERGE_AFTER" // how long convergence may take; default 5m
)

// defaultMaxRSSMiB bounds the proxy's resident memory (current and peak)
// once converged: the target at 10k services / 100k endpoints
// (BENCHMARKS.md), and so at any smaller size. KIP_E2E_SCALE_MAX_RSS_MIB overrides it.
const defaultMaxRSSMiB = 100

// createWorkers is how many goroutines create the objects.
const createWorkers = 8

// TestResidentMemoryAtScale loads services (KIP_E2E_SCALE_SERVICES,
// default 1,000) with endpoints each (KIP_E2E_SCALE_ENDPOINTS, default
// 10) through the API, with the metadata that kubectl apply and the
// EndpointSlice controller write (labels, last-applied-configuration,
// owner references, target refs, managed fields), and fails if the proxy
// binary's resident memory (now and at its peak) once it has converged
// exceeds defaultMaxRSSMiB. It runs the real binary in --dry-run watch
// mode (the same informers, engine and loop; no kernel on the host, and
// no listener: --dry-run opens none), waits for its first sync (its
// "First sync done" line, with every service), and logs VmRSS and VmHWM
// two seconds later. KIP_E2E_SCALE_BIN measures
// a prebuilt binary instead of building this tree. Opt-in (it creates
// 2 × services objects): KIP_E2E_SCALE=1.
func TestResidentMemoryAtScale(t *testing.T) {
	if os.Getenv(envScale) != "1" {
		t.Skip("set KIP_E2E_SCALE=1 to measure the proxy's memory at scale (default 1k services / 10k endpoints)")
	}
	services, perService := envInt(t, envServices, 1000), envInt(t, envPerService, 10)
	limit := int64(envInt(t, envMaxRSS, defaultMaxRSSMiB))
	converge := 5 * time.Minute
	if v := os.Getenv(envConverge); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %v", envConverge, err)
		}
		converge = d
	}
	if services > 250*245 || services*perService >= 1<<22 {
		t.Fatalf("at most %d services and %d endpoints", 250*245, 1<<22)
	}

	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	cfg := c.AdminConfig()
	cfg.QPS, cfg.Burst = 5000, 5000
	admin := kubernetes.NewForConfigOrDie(cfg)
	if _, err := admin.CoreV1().Nodes().Create(ctx, node(nodeName, "zone-a", "192.0.2.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := parallel(services, createWorkers, func(i int) error {
		svc, err := admin.CoreV1().Services("default").Create(ctx, scaleService(i), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create service %d: %w", i, err)
		}
		if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, scaleSlice(svc, i, perService), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create slice of service %d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d services and %d endpoints in %v", services, services*perService, time.Since(start).Round(time.Millisecond))

	bin := os.Getenv(envBinary)
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "kube-ipvs-proxy")
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kube-ipvs-proxy").CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(bin, "--dry-run", "--kubeconfig", c.Kubeconfig("admin"), "--hostname-override", nodeName,
		"--ipvs-min-sync-period", "1s")
	cmd.Stdout = nil // the plans go to /dev/null
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	start = time.Now()
	synced := firstSync(stderr)
	select {
	case n := <-synced:
		if n != services+1 { // and the kubernetes Service
			t.Fatalf("the first sync programmed %d services, want %d", n, services+1)
		}
	case <-time.After(converge):
		t.Fatalf("no first sync after %v (%s)", converge, envConverge)
	}
	t.Logf("first sync done in %v", time.Since(start).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	mem := residentMemory(t, cmd.Process.Pid)

	for _, f := range []string{"VmRSS", "VmHWM"} {
		t.Logf("%d services, %d endpoints: %s %d MiB (limit %d MiB)", services, services*perService, f, mem[f]>>10, limit)
		if mem[f]>>10 > limit {
			t.Errorf("%s %d MiB at %d services / %d endpoints, want at most %d MiB", f, mem[f]>>10, services,
				services*perService, limit)
		}
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// parallel runs do(0..n-1) on workers goroutines and returns the errors;
// a worker stops at its first.
func parallel(n, workers int, do func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := do(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// scaleService is service i, as kubectl apply creates it: labels and the
// last-applied-configuration annotation.
func scaleService(i int) *corev1.Service {
	svc := webService()
	svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	svc.Name, svc.Spec.ClusterIP = fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", 10+i/250, i%250+1)
	svc.Labels = map[string]string{"app.kubernetes.io/name": svc.Name, "app.kubernetes.io/part-of": "scale"}
	svc.Spec.Selector = map[string]string{"app.kubernetes.io/name": svc.Name}
	applied, err := json.Marshal(svc)
	if err != nil {
		panic(err) // a plain struct
	}
	svc.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: string(applied)}
	return svc
}

// scaleSlice is the slice the EndpointSlice controller writes for svc,
// service i: its labels, trigger time, owner reference and target refs;
// endpoints spread over 100 nodes in three zones, hinted for their zone.
func scaleSlice(svc *corev1.Service, i, perService int) *discoveryv1.EndpointSlice {
	var eps []endpoint
	for j := range perService {
		k := i*perService + j
		n := k % 100
		eps = append(eps, endpoint{endpointAddr(k), fmt.Sprintf("node-%d", n), fmt.Sprintf("zone-%c", 'a'+n%3)})
	}
	s := webSlice(eps...)
	s.Name = svc.Name + "-abc12"
	s.GenerateName = svc.Name + "-"
	s.Labels = map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		"app.kubernetes.io/name": svc.Name, "app.kubernetes.io/part-of": "scale"}
	s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339)}
	s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
		Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
	for j := range s.Endpoints {
		pod := fmt.Sprintf("%s-7d9f8b6c5-%05d", svc.Name, j)
		s.Endpoints[j].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod,
			UID: types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, j))}
	}
	return s
}

// endpointAddr is the k-th address of 10.64.0.0/10.
func endpointAddr(k int) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 10<<24+64<<16+uint32(k)+1)
	return netip.AddrFrom4(b).String()
}

var firstSyncLine = regexp.MustCompile(`"First sync done" services=(\d+)`)

// firstSync sends the services count of the proxy's "First sync done"
// line, read from its log; the rest of the log is drained.
func firstSync(log io.Reader) <-chan int {
	out := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(log)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			if m := firstSyncLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				n, _ := strconv.Atoi(m[1])
				out <- n
				sent = true
			}
		}
	}()
	return out
}

// residentMemory reads VmRSS and VmHWM (KiB) from /proc/pid/status.
func residentMemory(t *testing.T, pid int) map[string]int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || (f[0] != "VmRSS:" && f[0] != "VmHWM:") {
			continue
		}
		kib, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || f[2] != "kB" {
			t.Fatalf("/proc/%d/status: %q", pid, line)
		}
		out[strings.TrimSuffix(f[0], ":")] = kib
	}
	if len(out) != 2 {
		t.Fatalf("/proc/%d/status lacks VmRSS or VmHWM", pid)
	}
	return out
}
