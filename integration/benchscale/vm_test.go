//go:build integration

package benchscale

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labmain"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/vme2e"
)

func TestMain(m *testing.M) { labmain.Run(m) }

// vmHalf reads what the host half passed: the workload's size, the
// phases, and the binaries under measurement (label=path, in order).
func vmHalf(t *testing.T) (Workload, Phases, []proxyBin) {
	t.Helper()
	n, err := strconv.Atoi(os.Getenv(envVMServices))
	if err != nil {
		t.Fatalf("%s: %v", envVMServices, err)
	}
	w := Workload{Services: n}
	phases, err := PhasesFromEnv()
	if err == nil {
		err = w.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	var bins []proxyBin
	for _, spec := range strings.Split(os.Getenv(envVMProxies), ",") {
		label, path, ok := strings.Cut(spec, "=")
		if !ok {
			t.Fatalf("%s: %q is not label=path", envVMProxies, spec)
		}
		bins = append(bins, proxyBin{label, path})
	}
	reserveNodePorts(t)
	return w, phases, bins
}

// reserveNodePorts keeps the guest's own connections (the harness's and
// the proxies' to the apiserver) off the workload's NodePorts, as an
// operator whose NodePort range overlaps the ephemeral ports must:
// NodePortFirst-NodePortLast overlaps the kernel's default 32768-60999,
// and IPVS schedules a SYN-ACK to a virtual server's address and port as
// a new connection (no ACK check, in the kernel source read), so by that
// reading a TCP connection from the guest's NodePort address whose
// source port is a NodePort does not complete.
func reserveNodePorts(t *testing.T) {
	t.Helper()
	const path = "/proc/sys/net/ipv4/ip_local_reserved_ports"
	ports := fmt.Sprintf("%d-%d", NodePortFirst, NodePortLast)
	if err := os.WriteFile(path, []byte(ports), 0o644); err != nil {
		t.Fatalf("reserve the NodePorts %s: %v", ports, err)
	}
}

// loadedAdmin is a client of the host's apiserver with the admin's
// kubeconfig, once the workload the host loaded is there.
func loadedAdmin(t *testing.T, adminKC string, w Workload) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKC)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	admin := kubernetes.NewForConfigOrDie(cfg)
	last := w.Service(w.Services - 1)
	if _, err := admin.CoreV1().Services(last.Namespace).Get(context.Background(), last.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the host did not load the workload (%s/%s): %v", last.Namespace, last.Name, err)
	}
	return admin
}

// proxyBin is one binary under measurement.
type proxyBin struct{ label, path string }

// TestScaleInVM measures every proxy binary it is given against the
// workload the host loaded, Rounds times, interleaved and each round in
// the order opposite to the one before (A B, B A, A B …): a drift of the
// host's load hits both alike, and so does whatever running second in a
// round costs (RoundOrder). It prints one ResultPrefix line per run.
func TestScaleInVM(t *testing.T) {
	adminKC := os.Getenv(vme2e.EnvAdminKubeconfig)
	if adminKC == "" {
		t.Skip("run by the host half: make bench-scale")
	}
	w, phases, bins := vmHalf(t)
	if err := vme2e.BringUpNetwork(); err != nil {
		t.Fatal(err)
	}
	b := &bench{admin: loadedAdmin(t, adminKC, w), w: w, want: w.Expected(), phases: phases, gens: map[int]int{}}
	n := w.Services
	t.Logf("%d services, %d endpoints; the kernel must hold %+v", n, n*PerService, b.want)
	if thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		t.Logf("transparent huge pages: %s", strings.TrimSpace(string(thp)))
	}
	for round := range phases.Rounds {
		for _, bin := range RoundOrder(bins, round) {
			t.Run(fmt.Sprintf("%s#%d", bin.label, round+1), func(t *testing.T) {
				run := b.measure(t, bin, round)
				fmt.Println(resultLine(run))
			})
		}
	}
}

// trashEmpty bounds how long IPVS keeps deleted destinations in its
// trash: a timer every IP_VS_DEST_TRASH_PERIOD/2 (60 s) marks them idle,
// and frees them IP_VS_DEST_TRASH_PERIOD (120 s) later.
const trashEmpty = 250 * time.Second

// startClean starts a run: the kernel must be clean, and after the
// boot's first run IPVS's destination trash must be empty, since the
// last run's --cleanup left its destinations there and every
// destination added searches it until it empties (see floor): the cold
// start must find the kernel as a boot does. Reloading the IPVS modules
// would empty it at once, but moby/ipvs looks the generic netlink family
// up once per process, and a reload gives the family another id: this
// process could no longer read IPVS.
func (b *bench) startClean(t *testing.T, bin proxyBin, run *Run) {
	k := newKernel(t)
	if got, err := k.count(); err != nil || got != (Expected{}) {
		t.Fatalf("the kernel is not clean before the run: %+v (err %v)", got, err)
	}
	// The same through /proc/net/ip_vs, which the table-complete check
	// reads: it shows the namespace of the harness's main thread.
	if vs, dests, err := procIPVS(); err == nil && vs+dests > 0 {
		t.Fatalf("/proc/net/ip_vs lists %d virtual servers and %d destinations before the run", vs, dests)
	}
	if b.measured > 0 {
		t.Logf("waiting %v for IPVS's destination trash to empty", trashEmpty)
		time.Sleep(trashEmpty)
	}
	b.measured++
	b.t, b.k, b.bin, b.run = t, k, bin, run
}

// bench is the VM half's state across runs: the apiserver client, the
// workload, and each service's current last-endpoint generation, which
// the churn advances.
type bench struct {
	admin  kubernetes.Interface
	w      Workload
	want   Expected
	phases Phases
	gens   map[int]int // service → generation+1 of its last endpoint (0: initial)
	// measured counts the runs so far in this boot.
	measured int

	t   *testing.T
	k   *kernel
	bin proxyBin
	p   *proxyProc
	run *Run
	// started is the last start's, until afterStart.
	started startedProxy
}

// measure runs every phase against a cold kernel and leaves it clean.
func (b *bench) measure(t *testing.T, bin proxyBin, round int) Run {
	run := Run{Proxy: bin.label, Round: round, Services: b.w.Services, Endpoints: b.w.Services * PerService}
	b.startClean(t, bin, &run)
	cold := b.coldStart()
	b.heapProfile("after-cold-start")
	table := b.k.snapshot(t)
	b.idle()
	b.endpointChanges()
	b.burst()
	b.serviceChurn()
	b.churn()
	rss, hwm := b.p.memory(t)
	run.Add("memory at the end: RSS", rss, "MiB")
	run.Add("memory at the end: peak RSS (VmHWM)", hwm, "MiB")
	b.settledMemory("churn")
	b.heapProfile("at-the-end")
	b.restart()
	b.cleanup()
	b.floor(table, cold)
	b.batchedFloor(table, cold)
	b.writerFloor(table, cold)
	return run
}

// start runs the proxy and waits until it has synced the whole workload
// (kube_ipvs_proxy_virtual_servers adds up to it after a sync); then
// checks the kernel, untimed. The caller reads the proxy's CPU, then
// calls afterStart.
func (b *bench) start(phase string) (time.Duration, metrics) {
	t := b.t
	t.Helper()
	logPath := fmt.Sprintf("/tmp/proxy-%s-%d.log", b.bin.label, time.Now().UnixNano())
	start := time.Now()
	b.p = startProxy(t, b.bin.path, logPath, b.phases.Profile == 1)
	cp := b.profileStart(phase, start)
	limit := 5*time.Minute + time.Duration(b.w.Services)*60*time.Millisecond
	// Until /livez says a sync was applied, the harness asks only it:
	// scraping /metrics every 100 ms cost the proxy 4-5 CPU-s in its
	// first sync at 10,000 services (the process collector reading /proc,
	// the text, gzip, their garbage), which no Prometheus does.
	synced := false
	for {
		if b.p.exited() {
			b.p.fatal(t, "the proxy exited before it converged")
		}
		if !synced {
			if synced = live(); !synced {
				if time.Since(start) > limit {
					b.p.fatal(t, "not converged after %v: /livez never answered 200", limit)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		m, err := scrape()
		if err == nil && m.has(mLastSync) && int(m.sum(mVS)) == b.want.VirtualServers {
			took := time.Since(start)
			b.started = startedProxy{phase: phase, at: start, converged: time.Now(), cpu: b.p.cpu(t), cp: cp}
			b.startupTimeline(phase, start)
			b.k.waitCount(t, b.want, 2*time.Minute)
			return took, m
		}
		if time.Since(start) > limit {
			b.p.fatal(t, "not converged after %v: scrape error %v, virtual servers %v (want %d), synced %v",
				limit, err, m.sum(mVS), b.want.VirtualServers, m.has(mLastSync))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
