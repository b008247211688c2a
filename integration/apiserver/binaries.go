package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Environment knobs.
const (
	// EnvBuild=1 lets Start run hack/k8s/build.sh (a no-op when the
	// binaries are fresh, minutes when cold). Without it, Start uses the
	// binaries that are there and skips the test when there are none.
	EnvBuild = "KIP_APISERVER_BUILD"
	// EnvBinDir overrides the binaries' directory (default
	// <repo>/.cache/k8s/bin); hack/k8s/build.sh and the lab cluster
	// (hack/cluster) honour it too.
	EnvBinDir = "KIP_K8S_BIN_DIR"
)

// binaries returns the directory holding kube-apiserver and etcd, building
// them first when KIP_APISERVER_BUILD=1, and skips the test when they are
// missing otherwise.
func binaries(t testing.TB, binDir string) string {
	t.Helper()
	repo, repoErr := repoRoot()
	if binDir == "" {
		binDir = os.Getenv(EnvBinDir)
	}
	if binDir == "" {
		if repoErr != nil {
			t.Fatalf("apiserver: %v; set %s", repoErr, EnvBinDir)
		}
		binDir = filepath.Join(repo, ".cache", "k8s", "bin")
	}
	if os.Getenv(EnvBuild) == "1" {
		if repoErr != nil {
			t.Fatalf("apiserver: cannot build: %v", repoErr)
		}
		if err := build(repo, binDir); err != nil {
			t.Fatalf("apiserver: %v", err)
		}
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			t.Skipf("apiserver: %s not built (%v). Build it once with make apiserver "+
				"(a few minutes, cached in .cache/k8s/bin) or run with %s=1 to build it here.",
				name, err, EnvBuild)
		}
	}
	return binDir
}

// build runs hack/k8s/build.sh kube-apiserver etcd, which does nothing
// when the binaries are newer than their sources and serializes concurrent
// builds.
func build(repo, binDir string) error {
	cmd := exec.Command(filepath.Join(repo, "hack", "k8s", "build.sh"), "kube-apiserver", "etcd")
	cmd.Env = append(os.Environ(), EnvBinDir+"="+binDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/k8s/build.sh: %w\n%s", err, out.String())
	}
	return nil
}

// repoRoot walks up from the working directory (a test runs in its
// package's directory) to the directory holding hack/k8s/build.sh.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getwd: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "k8s", "build.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no hack/k8s/build.sh in any parent of the working directory")
		}
		dir = parent
	}
}

// tail returns the last n lines of the file at path, for failure reports.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
