package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The checks that the documentation's mechanically checkable claims hold:
// flag help, and README lines about the JSON output, fuzzing, the quick
// start and the lab cluster.

var repoRoot = filepath.Join("..", "..", "..")

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// flagHelp returns each flag's help line from --help.
func flagHelp(t *testing.T) map[string]string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := ParseFlags([]string{"--help"}, &buf); err != pflag.ErrHelp {
		t.Fatalf("--help: %v", err)
	}
	help := map[string]string{}
	re := regexp.MustCompile(`^\s+(?:-\w, )?--([\w-]+)\b.*$`)
	for _, l := range strings.Split(buf.String(), "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			help[m[1]] = l
		}
	}
	return help
}

// TestFlagHelpMatchesBehaviour: the help of these flags says what they
// do (the behaviour itself is tested in options_test.go: a conflicting
// --proxy-mode exits 2 with --config; hostaddrs for the NodePort
// addresses).
func TestFlagHelpMatchesBehaviour(t *testing.T) {
	help := flagHelp(t)
	tests := []struct {
		flag          string
		want, wantNot []string
	}{
		{"proxy-mode", []string{"exits 2, also with --config"}, []string{"Ignored if --config"}},
		{"nodeport-addresses", []string{"every address of the host's interfaces", "--dry-run, without a host: the Node's InternalIP and ExternalIP"},
			[]string{"default: every InternalIP and ExternalIP"}},
		{"cleanup", []string{"list them", "With --dry-run, list what it would remove"}, nil},
		{"logging-format", []string{"Log format: text or json, as kube-proxy's"}, []string{"only text logging is implemented", "Accepted for kube-proxy compatibility and ignored:"}},
	}
	for _, tc := range tests {
		t.Run(tc.flag, func(t *testing.T) {
			h, ok := help[tc.flag]
			if !ok {
				t.Fatalf("no --%s in --help", tc.flag)
			}
			for _, w := range tc.want {
				if !strings.Contains(h, w) {
					t.Errorf("--%s help lacks %q: %s", tc.flag, w, h)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(h, w) {
					t.Errorf("--%s help says %q: %s", tc.flag, w, h)
				}
			}
		})
	}
}

// TestREADMEJSONExample: README's --output json example has the fields
// the real output has, at the top level and in a virtual server.
func TestREADMEJSONExample(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README has no ```json block")
	}
	var example map[string]json.RawMessage
	if err := json.Unmarshal([]byte(m[1]), &example); err != nil {
		t.Fatalf("README's JSON example does not parse: %v", err)
	}
	var real map[string]json.RawMessage
	if err := json.Unmarshal([]byte(readRepoFile(t, "examples/plans/node-a.json")), &real); err != nil {
		t.Fatal(err)
	}
	if got, want := sortedKeys(example), sortedKeys(real); !slices.Equal(got, want) {
		t.Errorf("README's JSON example has top-level fields %v, the output %v", got, want)
	}
	var exVS, realVS []map[string]json.RawMessage
	if err := json.Unmarshal(example["virtualServers"], &exVS); err != nil || len(exVS) == 0 {
		t.Fatalf("example virtualServers: %v", err)
	}
	if err := json.Unmarshal(real["virtualServers"], &realVS); err != nil {
		t.Fatal(err)
	}
	fields := map[string]bool{}
	for _, vs := range realVS {
		for k := range vs {
			fields[k] = true
		}
	}
	for k := range exVS[0] {
		if !fields[k] {
			t.Errorf("README's example virtual server has %q, which the output never has", k)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestREADMEFuzzClaim: README says how many fuzzers `make fuzz` runs,
// each one it runs exists, and it runs every fuzzer of the tree.
func TestREADMEFuzzClaim(t *testing.T) {
	mk := readRepoFile(t, "Makefile")
	target := regexp.MustCompile(`(?s)\nfuzz:\n(.*?)\n\n`).FindStringSubmatch(mk)
	if target == nil {
		t.Fatal("Makefile has no fuzz target")
	}
	runs := regexp.MustCompile(`-fuzz (Fuzz\w+) .* (\./\S+)`).FindAllStringSubmatch(target[1], -1)
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}
	if len(runs) >= len(words) {
		t.Fatalf("%d fuzzers", len(runs))
	}
	readme := readRepoFile(t, "README.md")
	claim := words[len(runs)] + " fuzzers"
	if strings.Count(readme, claim) < 2 {
		t.Errorf("README should say %q where it describes `make fuzz` and the fuzzing (found %d times)", claim, strings.Count(readme, claim))
	}
	for _, r := range runs {
		src, err := filepath.Glob(filepath.Join(repoRoot, r[2], "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range src {
			data, _ := os.ReadFile(f)
			found = found || bytes.Contains(data, []byte("func "+r[1]+"("))
		}
		if !found {
			t.Errorf("make fuzz runs %s in %s, which has no such fuzzer", r[1], r[2])
		}
	}
	run := map[string]bool{}
	for _, r := range runs {
		run[r[1]] = true
	}
	for _, f := range treeFuzzers(t) {
		if !run[f] {
			t.Errorf("%s is not run by make fuzz", f)
		}
	}
}

// treeFuzzers lists the fuzz targets of the module's test files (not the
// separate modules under hack/).
func treeFuzzers(t *testing.T) []string {
	t.Helper()
	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	var out []string
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git" || d.Name() == "hack") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range fuzzFunc.FindAllStringSubmatch(string(data), -1) {
				out = append(out, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestREADMEQuickStart: the quick start says that make test needs root
// and apt, and does not call the multi-node lab cluster untried while
// conformance/README.md records a three-node run.
func TestREADMEQuickStart(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	start := strings.Index(readme, "## Quick start")
	end := strings.Index(readme, "## Running it")
	if start < 0 || end < start {
		t.Fatal("README has no Quick start section")
	}
	quick := readme[start:end]
	for _, w := range []string{"`make test` also needs root", "apt", "network namespace"} {
		if !strings.Contains(quick, w) {
			t.Errorf("Quick start lacks %q", w)
		}
	}
	if strings.Contains(readme, "not yet brought up") &&
		strings.Contains(readRepoFile(t, "conformance/README.md"), "three nodes in three zones") {
		t.Error("README says the multi-node lab cluster was not brought up; conformance/README.md records a three-node run")
	}
}
