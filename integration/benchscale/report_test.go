//go:build !integration

package benchscale

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/benchscale/results"
)

// hostBin is a proxy binary built on the host for the VM.
type hostBin struct{ label, path string }

// buildProxies builds the working tree's proxy ("tree") and, with
// EnvBase, a second one to compare ("base", measured first in odd
// rounds). about says what each is.
func buildProxies(t *testing.T, repo string) (bins []hostBin, about []string) {
	t.Helper()
	dir := t.TempDir()
	if base := os.Getenv(EnvBase); base != "" {
		path, what := baseBinary(t, repo, dir, base)
		bins = append(bins, hostBin{"base", path})
		about = append(about, "base: "+what)
	}
	tree := filepath.Join(dir, "kip-proxy-tree")
	goBuild(t, repo, tree)
	bins = append(bins, hostBin{"tree", tree})
	at := "(not a git checkout)"
	if d, err := exec.Command("git", "-C", repo, "describe", "--always", "--dirty").Output(); err == nil {
		at = strings.TrimSpace(string(d))
	}
	about = append(about, "tree: the working tree at "+at)
	return bins, about
}

// baseBinary is EnvBase's binary: the file it names, or the proxy built
// from the git revision it names (extracted with git archive, so the
// repository and its worktrees are left alone).
func baseBinary(t *testing.T, repo, dir, base string) (path, what string) {
	t.Helper()
	if st, err := os.Stat(base); err == nil && !st.IsDir() {
		abs, err := filepath.Abs(base)
		if err != nil {
			t.Fatal(err)
		}
		return abs, "the binary " + abs
	}
	rev := git(t, repo, "rev-parse", "--short", base+"^{commit}")
	src := filepath.Join(dir, "base-src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", rev, src)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	path = filepath.Join(dir, "kip-proxy-base")
	goBuild(t, src, path)
	return path, fmt.Sprintf("commit %s (%s)", rev, git(t, repo, "log", "-1", "--format=%s", rev))
}

// goBuild builds the proxy of the module at dir into out, static.
func goBuild(t *testing.T, dir, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, "./cmd/kube-ipvs-proxy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, b)
	}
}

func git(t *testing.T, repo string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// machineLines say when the run started and on what.
func machineLines() []string {
	return []string{
		"Measured " + time.Now().UTC().Format("2006-01-02 15:04 MST") + "; host load average at the start " + loadAverage() + ".",
		fmt.Sprintf("Host: %d CPUs (%s), %s; VM: qemu TCG, %s vCPUs, %s MiB, Debian's cloud kernel.",
			runtime.NumCPU(), cpuModel(), memTotal(), envOr("VMLAB_SMP", "2"), envOr("VMLAB_MEM", "1024")),
	}
}

// header describes the run: when, on what, which binaries, which sizes.
func header(repo string, p Phases, about []string) []string {
	h := append(machineLines(), about...)
	h = append(h, "Each proxy runs with the DaemonSet's command line and deploy/base's config.conf (as in the tree measured from).")
	return append(h, fmt.Sprintf("Phases: %d round(s), the first proxy above first in odd rounds and last in even ones; idle %v; %d sequential endpoint changes; a burst of %d; %d services created and deleted.",
		p.Rounds, p.Idle, p.Changes, p.Burst, p.NewServices))
}

// markdown is the report as make bench-scale's tables.
func markdown(r results.Report) string {
	var b strings.Builder
	b.WriteString("## make bench-scale\n\n")
	for _, l := range r.Header {
		b.WriteString(l + "\n")
	}
	for _, s := range r.Scales {
		fmt.Fprintf(&b, "\n### %d services, %d endpoints (host load average after: %s)\n\n%s",
			s.Services, s.Services*PerService, s.LoadAfter, Table(s.Runs))
	}
	if n := len(r.Scales); n >= 2 {
		fmt.Fprintf(&b, "\n### Scaling\n\n%s", ScalingTable(r.Scales[0].Runs, r.Scales[n-1].Runs, "tree"))
	}
	return b.String()
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// cpuModel is /proc/cpuinfo's first "model name".
func cpuModel() string {
	return procField("/proc/cpuinfo", "model name", "unknown CPU")
}

func memTotal() string {
	return procField("/proc/meminfo", "MemTotal", "unknown") + " of memory"
}

func procField(path, key, def string) string {
	f, err := os.Open(path)
	if err != nil {
		return def
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return def
}
