package app

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// TestBuildInfoIsServedOnceWithTheStampedVersion: /metrics (our registry
// and component-base's, as served) holds kubernetes_build_info once, with
// the version --version prints.
func TestBuildInfoIsServedOnceWithTheStampedVersion(t *testing.T) {
	labels := buildInfoLabels(t)
	if got, want := labels["git_version"], buildVersion().GitVersion; got != want {
		t.Errorf("git_version %q; want %q", got, want)
	}
	var out bytes.Buffer
	printVersion(&out, "true")
	if got := out.String(); !strings.HasPrefix(got, "kube-ipvs-proxy ") || !strings.Contains(got, buildVersion().GitVersion) {
		t.Errorf("--version printed %q", got)
	}
}

// buildInfoLabels registers kubernetes_build_info, gathers what /metrics
// serves, and returns the one series' labels; it fails unless the metric
// is served exactly once with one series.
func buildInfoLabels(t *testing.T) map[string]string {
	t.Helper()
	reg := metrics.NewRegistry()
	if err := registerBuildInfo(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := servedGatherer(reg).Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var labels map[string]string
	for _, mf := range mfs {
		if mf.GetName() != "kubernetes_build_info" {
			continue
		}
		if labels != nil {
			t.Fatal("kubernetes_build_info served twice; want once")
		}
		m := mf.GetMetric()
		if len(m) != 1 {
			t.Fatalf("kubernetes_build_info has %d series; want 1", len(m))
		}
		labels = map[string]string{}
		for _, l := range m[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
	}
	if labels == nil {
		t.Fatal("kubernetes_build_info is not served")
	}
	return labels
}

// TestVersionInfoIsLoggedAsKubeProxys: the start logs kube-proxy's
// "Version info" line, under its key, with the version --version prints.
func TestVersionInfoIsLoggedAsKubeProxys(t *testing.T) {
	logger, buf := bufferLogger()
	logVersion(logger)
	want := `"Version info" version="` + buildVersion().GitVersion + `"`
	if got := buf.String(); !strings.Contains(got, want) {
		t.Errorf("logged %q; want a line with %s", got, want)
	}
}

// stampedEnv carries, into the stamped re-run of
// TestStampedBuildAgrees, what hack/version.sh said: "version commit tag".
const stampedEnv = "KIP_TEST_STAMPED"

// TestStampedBuildAgrees: in a build stamped by hack/version.sh, as `make
// build` and `make image` stamp it, --version, --version=raw and
// kubernetes_build_info carry the version and commit the script prints, the
// image tag is that version, and the version is VERSION's. The test
// compiles this package's tests with the stamp and runs itself there.
func TestStampedBuildAgrees(t *testing.T) {
	if want := os.Getenv(stampedEnv); want != "" {
		checkStamped(t, strings.Fields(want))
		return
	}
	script := filepath.Join(repoRoot, "hack", "version.sh")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(script, args...).Output()
		if err != nil {
			t.Fatalf("hack/version.sh %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	ldflags, version, commit, tag := run("ldflags"), run("version"), run("commit"), run("tag")
	base, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	scheme := `^v` + regexp.QuoteMeta(strings.TrimSpace(string(base))) +
		`(-[0-9]+-g[0-9a-f]{12}|-shallow-g[0-9a-f]{12})?(-dirty)?$`
	if !regexp.MustCompile(scheme).MatchString(version) {
		t.Errorf("hack/version.sh version = %q; want it to match %s", version, scheme)
	}
	bin := filepath.Join(t.TempDir(), "app.test")
	build := exec.Command("go", "test", "-c", "-o", bin, "-ldflags", ldflags, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c -ldflags %q: %v\n%s", ldflags, err, out)
	}
	cmd := exec.Command(bin, "-test.run", "^TestStampedBuildAgrees$", "-test.v")
	cmd.Env = append(os.Environ(), stampedEnv+"="+version+" "+commit+" "+tag)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestStampedBuildAgrees")) {
		t.Fatalf("the stamped build (%s) disagrees: %v\n%s", version, err, out)
	}
}

// checkStamped runs inside the stamped test binary; want is version,
// commit and image tag as hack/version.sh printed them.
func checkStamped(t *testing.T, want []string) {
	if len(want) != 3 {
		t.Fatalf("%s=%q; want version, commit and tag", stampedEnv, want)
	}
	version, commit, tag := want[0], want[1], want[2]
	if tag != version {
		t.Errorf("image tag %q; want the version %q", tag, version)
	}
	var out bytes.Buffer
	printVersion(&out, "true")
	if got, want := out.String(), "kube-ipvs-proxy "+version+"\n"; got != want {
		t.Errorf("--version printed %q; want %q", got, want)
	}
	out.Reset()
	printVersion(&out, "raw")
	for _, field := range []string{`GitVersion:"` + version + `"`, `GitCommit:"` + commit + `"`} {
		if !strings.Contains(out.String(), field) {
			t.Errorf("--version=raw printed %q; want %s in it", out.String(), field)
		}
	}
	labels := buildInfoLabels(t)
	if labels["git_version"] != version || labels["git_commit"] != commit {
		t.Errorf("kubernetes_build_info git_version=%q git_commit=%q; want %q and %q",
			labels["git_version"], labels["git_commit"], version, commit)
	}
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	if labels["major"] != major || labels["minor"] != minor {
		t.Errorf("kubernetes_build_info major=%q minor=%q; want %q and %q", labels["major"], labels["minor"], major, minor)
	}
}

// TestVersionSchemeFollowsTheVERSIONFile: hack/version.sh in a scratch
// repository, step by step: the commit that sets VERSION is the release,
// later commits count from it, a changed work tree is dirty, a shallow
// clone cannot count, and a VERSION that is no semver is refused.
func TestVersionSchemeFollowsTheVERSIONFile(t *testing.T) {
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join(repoRoot, "hack", "version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(dir, "init", "-q")
	if err := os.MkdirAll(filepath.Join(dir, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hack", "version.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		do   func()
		in   string // the checkout to run in: dir unless set
		want string // a regexp the version matches; "" when the script must fail
	}{
		{"the commit that sets VERSION is the release", func() {
			write("VERSION", "0.1.0\n")
			git(dir, "add", ".")
			git(dir, "commit", "-qm", "release 0.1.0")
		}, "", `^v0\.1\.0$`},
		{"a later commit counts from the release", func() {
			write("a", "1")
			git(dir, "add", "a")
			git(dir, "commit", "-qm", "a")
			git(dir, "commit", "-q", "--allow-empty", "-m", "b")
		}, "", `^v0\.1\.0-2-g[0-9a-f]{12}$`},
		{"a changed work tree is dirty", func() { write("a", "2") }, "", `^v0\.1\.0-2-g[0-9a-f]{12}-dirty$`},
		{"a VERSION bump is the next release", func() {
			write("VERSION", "0.2.0\n")
			git(dir, "commit", "-qam", "release 0.2.0")
		}, "", `^v0\.2\.0$`},
		{"a shallow clone without the tag cannot count", func() {
			git(dir, "commit", "-q", "--allow-empty", "-m", "c")
			git(t.TempDir(), "clone", "-q", "--depth", "1", "file://"+dir, filepath.Join(dir, ".shallow"))
		}, ".shallow", `^v0\.2\.0-shallow-g[0-9a-f]{12}$`},
		{"a VERSION that is no semver is refused", func() { write("VERSION", "0.3\n") }, "", ""},
	} {
		step.do()
		in := filepath.Join(dir, step.in)
		out, err := exec.Command(filepath.Join(in, "hack", "version.sh"), "version").Output()
		got := strings.TrimSpace(string(out))
		switch {
		case step.want == "" && err == nil:
			t.Errorf("%s: version.sh printed %q; want a failure", step.name, got)
		case step.want != "" && err != nil:
			t.Errorf("%s: version.sh: %v", step.name, err)
		case step.want != "" && !regexp.MustCompile(step.want).MatchString(got):
			t.Errorf("%s: version %q; want %s", step.name, got, step.want)
		}
	}
}
