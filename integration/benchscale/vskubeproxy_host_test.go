//go:build !integration

package benchscale

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/benchscale/results"
)

// defaultVsChanges is how many endpoint changes each proxy is timed on
// unless KIP_BENCH_SCALE_CHANGES says: kube-proxy takes seconds for
// each at 1,000 services under TCG on a shared host.
const defaultVsChanges = 5

// TestVsKubeProxy is make bench-vs-kube-proxy: for each scale, an
// apiserver on the host loaded with the workload and one VM boot in
// which TestVsKubeProxyInVM measures upstream kube-proxy
// (.cache/k8s/bin/kube-proxy, built by hack/k8s/build.sh) and the
// working tree's proxy, Rounds times each. It prints one table per
// scale and writes them, with the raw runs as JSON, to
// .cache/bench-scale/vs-kube-proxy-<time>.{md,json}, and the JSON
// also to benchmarks/vs-kube-proxy/<time>.json, where make bench-plot
// renders BENCHMARKS.md's table from the committed files. The VM needs
// iptables and ipset: VMLAB_EXTRA_TREE must hold them (the Makefile
// stages them).
func TestVsKubeProxy(t *testing.T) {
	if os.Getenv("KIP_BENCH_VS_KUBE_PROXY") != "1" {
		t.Skip("boots a VM for tens of minutes: set KIP_BENCH_VS_KUBE_PROXY=1 (make bench-vs-kube-proxy)")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tree := os.Getenv("VMLAB_EXTRA_TREE") // relative to the repository, where run.sh runs
	if !filepath.IsAbs(tree) {
		tree = filepath.Join(repo, tree)
	}
	if _, err := os.Stat(filepath.Join(tree, "bin", "xtables-nft-multi")); os.Getenv("VMLAB_EXTRA_TREE") == "" || err != nil {
		t.Fatalf("VMLAB_EXTRA_TREE=%q does not hold iptables and ipset (make bench-vs-kube-proxy stages them)", tree)
	}
	if os.Getenv("KIP_BENCH_SCALE_CHANGES") == "" {
		t.Setenv("KIP_BENCH_SCALE_CHANGES", strconv.Itoa(defaultVsChanges))
	}
	phases, err := PhasesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	scales := scalesFromEnv(t, "1000 5000 10000")
	out := outputDir(t, repo, scales)
	when := time.Now().UTC().Format("20060102-150405") // hack/benchplot reads it back from the committed copy's name
	stamp := "vs-kube-proxy-" + when
	kp, kpVersion := kubeProxyBinary(t, repo)
	ours := filepath.Join(t.TempDir(), "kip-proxy-ours")
	goBuild(t, repo, ours)
	at := "(not a git checkout)"
	if d, err := exec.Command("git", "-C", repo, "describe", "--always", "--dirty").Output(); err == nil {
		at = strings.TrimSpace(string(d))
	}
	rep := results.Report{Header: append(machineLines(),
		"kube-proxy: "+kp+" ("+kpVersion+"), IPv4 only (no ip6tables in the VM), iptables-nft.",
		"ours: the working tree at "+at+".",
		"Both: deploy/base's config.conf (mode: ipvs) with nodePortAddresses ["+GuestAddr+"/32], --hostname-override (kube-proxy with the admin's kubeconfig, for its ServiceCIDR watch); one after the other in one boot, a clean kernel and an empty IPVS trash before each.",
		fmt.Sprintf("%d round(s); %d sequential endpoint changes each; waits in s: for the table %d from the start (0: the default bound, which fails the run), for the first sync %d after the table (0: none).",
			phases.Rounds, phases.Changes, phases.TableWait, phases.FirstSyncWait),
	)}
	for _, n := range scales {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			w := Workload{Services: n}
			runs := measureVersus(t, repo, filepath.Join(out, fmt.Sprintf("%s-%d.console.log", stamp, n)), w, phases, kp, ours)
			rep.Scales = append(rep.Scales, results.Scale{Services: n, LoadAfter: loadAverage(), Runs: runs})
		})
	}
	base := filepath.Join(out, stamp)
	js := writeReport(t, base, versusMarkdown(rep), rep)
	// .cache is not committed; this copy is, so that BENCHMARKS.md's
	// table (make bench-plot) is rendered from files anyone can check.
	kept := filepath.Join(repo, "benchmarks", "vs-kube-proxy", when+".json")
	if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept, js, 0o644); err != nil {
		t.Fatalf("copy the result for make bench-plot: %v", err)
	}
	t.Logf("results: %s.md and %s.json; to commit: %s (then make bench-plot)", base, base, kept)
}

// kubeProxyBinary is .cache/k8s/bin/kube-proxy, built by hack/k8s/build.sh
// when missing, and its --version.
func kubeProxyBinary(t *testing.T, repo string) (path, version string) {
	t.Helper()
	path = filepath.Join(repo, ".cache", "k8s", "bin", "kube-proxy")
	if _, err := os.Stat(path); err != nil {
		cmd := exec.Command(filepath.Join(repo, "hack", "k8s", "build.sh"), "kube-proxy")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/k8s/build.sh kube-proxy: %v\n%s", err, out)
		}
	}
	v, err := exec.Command(path, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", path, err)
	}
	return path, strings.TrimSpace(string(v))
}

// measureVersus starts an apiserver, loads the workload and measures
// both proxies in one VM boot; it returns the runs the VM reported.
func measureVersus(t *testing.T, repo, consoleLog string, w Workload, phases Phases, kubeProxy, ours string) []Run {
	runs := 2 * phases.Rounds
	// kube-proxy's first sync took about 10 minutes at 5,000 services.
	perRun := 10*time.Minute + time.Duration(w.Services)*400*time.Millisecond + trashWait +
		time.Duration(phases.Changes)*5*time.Minute
	inVM := 5*time.Minute + time.Duration(runs)*perRun
	const kpDst, oursDst = "/bin/kube-proxy", "/bin/kip-proxy-ours"
	files := []string{kubeProxy + ":" + kpDst, ours + ":" + oursDst}
	env := append(phases.Env(), envVMServices+"="+strconv.Itoa(w.Services), envVMVsKubeProxy+"=1",
		envVMProxies+"="+results.KubeProxy+"="+kpDst+","+results.Ours+"="+oursDst)
	_, got := runInVM(t, repo, consoleLog, w, inVM, files, env, "TestVsKubeProxyInVM")
	if len(got) != runs {
		t.Fatalf("the VM reported %d runs, want %d", len(got), runs)
	}
	return got
}

// trashWait is the VM half's wait for IPVS's destination trash between
// runs (trashEmpty), for the host's time bound.
const trashWait = 250 * time.Second

func versusMarkdown(r results.Report) string {
	var b strings.Builder
	b.WriteString("## make bench-vs-kube-proxy\n\n")
	for _, l := range r.Header {
		b.WriteString(l + "\n")
	}
	for _, s := range r.Scales {
		fmt.Fprintf(&b, "\n### %d services, %d endpoints (host load average after: %s)\n\n%s",
			s.Services, s.Services*PerService, s.LoadAfter, Table(s.Runs))
		kpT, ok1 := median(s.Runs, results.KubeProxy, results.TableComplete)
		ourT, ok2 := median(s.Runs, results.Ours, results.TableComplete)
		kpC, ok3 := median(s.Runs, results.KubeProxy, results.CPUUntilTable)
		ourC, ok4 := median(s.Runs, results.Ours, results.CPUUntilTable)
		if ok1 && ok2 && ok3 && ok4 && ourT > 0 && kpC > 0 {
			fmt.Fprintf(&b, "\nMedians: IPVS table complete %.2f× faster than kube-proxy (target ≥ 3×); CPU until then %.2f of kube-proxy's (target ≤ 0.5).\n",
				kpT/ourT, ourC/kpC)
		}
	}
	return b.String()
}
