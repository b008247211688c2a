//go:build integration

package benchscale

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// metricsAddr is deploy/base's metricsBindAddress.
	metricsAddr = "127.0.0.1:10249"
	// healthAddr is deploy/base's healthzBindAddress.
	healthAddr = "127.0.0.1:10256"
	// userHZ is the kernel's clock tick for /proc/<pid>/stat (x86: 100).
	userHZ = 100
)

// proxyProc is the proxy binary under measurement, run as its own
// process so that its CPU time and memory are its own. Its output goes
// to a file (the serial console is slow); failures print its tail.
type proxyProc struct {
	cmd     *exec.Cmd
	logPath string
	done    chan error
}

// startProxy runs bin in the real mode with the DaemonSet's command line
// and deploy/base's config file (the host put it at ConfigPath): what
// users get is what is measured.
func startProxy(t *testing.T, bin, logPath string, profiling bool) *proxyProc {
	t.Helper()
	config := ConfigPath
	if profiling {
		// With --config, kube-proxy's flags (--profiling among them) are
		// ignored: the config file must say enableProfiling.
		config = profilingConfig(t)
	}
	return startWith(t, logPath, bin, "--config="+config, "--hostname-override="+NodeName)
}

// startWith runs a proxy binary with args, its output to logPath.
func startWith(t *testing.T, logPath, bin string, args ...string) *proxyProc {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &proxyProc{cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	t.Cleanup(func() { p.kill() })
	return p
}

// stop sends SIGTERM and waits for the exit, as the kubelet does on a
// rollout; it returns how long the exit took.
func (p *proxyProc) stop(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			p.fatal(t, "the proxy exited with %v on SIGTERM", err)
		}
	case <-time.After(2 * time.Minute):
		p.fatal(t, "the proxy did not exit within 2m of SIGTERM")
	}
	return time.Since(start)
}

func (p *proxyProc) kill() {
	select {
	case err := <-p.done:
		p.done <- err
	default:
		_ = p.cmd.Process.Kill()
	}
}

// exited reports whether the process has ended.
func (p *proxyProc) exited() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	default:
		return false
	}
}

// fatal fails the test with the proxy's log tail.
func (p *proxyProc) fatal(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s\nthe proxy's log (%s), last lines:\n%s", fmt.Sprintf(format, args...), p.logPath, tail(p.logPath, 40))
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// cpu is the process's user+system CPU time so far.
func (p *proxyProc) cpu(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command: state is field 3, utime 14, stime 15.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", p.cmd.Process.Pid, b)
	}
	ticks := 0
	for _, s := range f[11:13] {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %q", p.cmd.Process.Pid, b)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// memory returns the process's VmRSS and VmHWM (peak) in MiB.
func (p *proxyProc) memory(t *testing.T) (rss, hwm float64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) != 3 || fs[2] != "kB" {
			continue
		}
		kib, _ := strconv.ParseFloat(fs[1], 64)
		switch fs[0] {
		case "VmRSS:":
			rss = kib / 1024
		case "VmHWM:":
			hwm = kib / 1024
		}
	}
	return rss, hwm
}

// rssSplit reads how the proxy's resident memory splits: anonymous
// (heap, stacks, runtime) and file-backed (the binary's pages), and
// whether the kernel may give it transparent huge pages.
func (p *proxyProc) rssSplit(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "RssAnon:") || strings.HasPrefix(l, "RssFile:") || strings.HasPrefix(l, "RssShmem:") ||
			strings.HasPrefix(l, "THP_enabled:") {
			parts = append(parts, strings.Join(strings.Fields(l), " "))
		}
	}
	// Of the anonymous memory, how much sits in transparent huge pages:
	// khugepaged can fold pages the runtime released back into them.
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p.cmd.Process.Pid)); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "AnonHugePages:") {
				parts = append(parts, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// metrics is one scrape of /metrics: each series ("name{labels}") and
// its value.
type metrics map[string]float64

// live reports whether the proxy's /livez answers 200: it has applied
// a sync (503 before the first). Far cheaper to ask than /metrics, whose
// process collector reads /proc at every scrape.
func live() bool {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + healthAddr + "/livez")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// scrape reads the proxy's /metrics.
func scrape() (metrics, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	m := metrics{}
	for _, l := range strings.Split(string(body), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			m[l[:i]] = v
		}
	}
	if len(m) == 0 {
		return nil, errors.New("/metrics: no series")
	}
	return m, nil
}

// sum adds the series of one metric whose labels contain every
// "key=\"value\"" in match.
func (m metrics) sum(name string, match ...string) float64 {
	total := 0.0
	for series, v := range m {
		n, labels, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, want := range match {
			ok = ok && strings.Contains(labels, want)
		}
		if ok {
			total += v
		}
	}
	return total
}

// has reports whether the metric has any series.
func (m metrics) has(name string) bool {
	for series := range m {
		if n, _, _ := strings.Cut(series, "{"); n == name {
			return true
		}
	}
	return false
}

// The metrics the harness reads; kube-proxy's names where they exist.
const (
	mSyncCount    = "kubeproxy_sync_proxy_rules_duration_seconds_count"
	mSyncSum      = "kubeproxy_sync_proxy_rules_duration_seconds_sum"
	mLastSync     = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	mVS           = "kube_ipvs_proxy_virtual_servers"
	mNetlinkOps   = "kube_ipvs_proxy_netlink_ops_total"
	mHeapInuse    = "go_memstats_heap_inuse_bytes"
	mHeapAlloc    = "go_memstats_heap_alloc_bytes"
	mHeapIdle     = "go_memstats_heap_idle_bytes"
	mHeapReleased = "go_memstats_heap_released_bytes"
	mStackInuse   = "go_memstats_stack_inuse_bytes"
	mGoSys        = "go_memstats_sys_bytes"
	mSpanInuse    = "go_memstats_mspan_inuse_bytes"
	mGCSys        = "go_memstats_gc_sys_bytes"
	mOtherSys     = "go_memstats_other_sys_bytes"
	mBuckHashSys  = "go_memstats_buck_hash_sys_bytes"
	mNextGC       = "go_memstats_next_gc_bytes"
	opsAttempted  = `result="attempted"`
)

// counters is what a phase reads before and after itself.
type counters struct {
	at    time.Time
	cpu   time.Duration
	syncs float64
	syncS float64 // seconds spent in syncs
	ops   float64 // IPVS netlink operations attempted
}

func (p *proxyProc) counters(t *testing.T) counters {
	t.Helper()
	m, err := scrape()
	if err != nil {
		p.fatal(t, "scrape: %v", err)
	}
	return counters{at: time.Now(), cpu: p.cpu(t), syncs: m.sum(mSyncCount), syncS: m.sum(mSyncSum),
		ops: m.sum(mNetlinkOps, opsAttempted)}
}

// delta is what happened between two readings.
func (c counters) delta(later counters) counters {
	return counters{at: c.at, cpu: later.cpu - c.cpu, syncs: later.syncs - c.syncs,
		syncS: later.syncS - c.syncS, ops: later.ops - c.ops}
}

// profilingConfig is deploy/base's config file with enableProfiling.
func profilingConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("enableProfiling:")) {
		t.Fatalf("%s already sets enableProfiling; KIP_BENCH_SCALE_PROFILE would set it twice", ConfigPath)
	}
	path := filepath.Join(t.TempDir(), "config-profiling.conf")
	if err := os.WriteFile(path, intoFirstDocument(b, "enableProfiling: true"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
