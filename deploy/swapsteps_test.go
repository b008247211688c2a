package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The migration run (conformance/migrate.sh, behind make migration and
// make migration-matrix) is the proof of the install steps only while it
// runs them as the READMEs write them. These tests hold it to that.

const migrateScript = "../conformance/migrate.sh"

// runPlaceholders turn a documented command into the run's: the docs'
// placeholders become the run's variables. Nothing else may differ.
var runPlaceholders = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`REGISTRY/kube-ipvs-proxy:TAG`), `"$OURS"`},
	{regexp.MustCompile(`~/\.kube/config`), `"$KUBECONFIG"`},
	{regexp.MustCompile(`\bNODE\b`), `"$node"`},
}

// swapSections are the README sections whose commands the run executes:
// file, then the headings of its sections.
var swapSections = []struct {
	file     string
	headings []string
}{
	{"../README.md", []string{"## Install"}},
	{"README.md", []string{"## Replace kube-proxy on a kubeadm cluster: one image swap", "## Roll back"}},
}

// TestMigrationRunRunsTheDocumentedCommands: every shell command in the
// code blocks of README.md's Install and of deploy/README.md's swap and
// rollback, its placeholders filled, is a command line of migrate.sh
// (not a comment), word for word up to spacing; a command a file
// documents k times (rollout status) is on k lines of the run.
func TestMigrationRunRunsTheDocumentedCommands(t *testing.T) {
	script := scriptCommands(t, readFile(t, migrateScript))
	n := 0
	for _, doc := range swapSections {
		text := readFile(t, doc.file)
		documented := map[string]int{}
		var order []string
		for _, h := range doc.headings {
			cmds := documentedCommands(t, section(t, text, doc.file, h))
			if len(cmds) == 0 {
				t.Errorf("%s %q: no command in its code blocks", doc.file, h)
			}
			for _, c := range cmds {
				if documented[c] == 0 {
					order = append(order, c)
				}
				documented[c]++
				n++
			}
		}
		for _, c := range order {
			want := fillPlaceholders(c)
			if got := runs(script, want); got < documented[c] {
				t.Errorf("%s documents %d time(s)\n\t%s\nwhich migrate.sh runs %d time(s) as\n\t%s", doc.file, documented[c], c, got, want)
			}
		}
	}
	t.Logf("%d documented commands checked", n)
}

// TestSwapStepsCommandExtraction: the parts of the test above that could
// hide a difference: continuation lines, trailing comments, YAML in a
// code block, and the end of a match.
func TestSwapStepsCommandExtraction(t *testing.T) {
	doc := "## S\n\nprose `kubectl not-a-block`\n\n    kubectl kustomize deploy/handback \\\n      | kubectl apply -f -\n" +
		"    curl -s http://127.0.0.1:10256/healthz     # 200\n\n      proxy:\n        disabled: true\n## T\n"
	got := documentedCommands(t, section(t, doc, "doc", "## S"))
	want := []string{"kubectl kustomize deploy/handback | kubectl apply -f -", "curl -s http://127.0.0.1:10256/healthz"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands = %q, want %q", got, want)
	}
	script := scriptCommands(t, "# kubectl -n kube-system rollout status ds/kube-proxy --timeout=30m\n"+
		"kubectl -n kube-system rollout status ds/kube-proxy --timeout=30ms\n"+
		"if ! kube-ipvs-proxy --preflight --hostname-override \"$node\" >log 2>&1; then\n")
	for _, tc := range []struct {
		cmd  string
		runs int
	}{
		{"kubectl -n kube-system rollout status ds/kube-proxy --timeout=30m", 0}, // a comment, and a longer word
		{"kube-ipvs-proxy --preflight --hostname-override NODE", 1},
		{"kube-ipvs-proxy --preflight --hostname-override OTHER", 0},
	} {
		if got := runs(script, fillPlaceholders(tc.cmd)); got != tc.runs {
			t.Errorf("runs(%q) = %d, want %d", tc.cmd, got, tc.runs)
		}
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// section is the text under heading, up to the next heading of its level
// or above.
func section(t *testing.T, text, file, heading string) string {
	t.Helper()
	lines := strings.Split(text, "\n")
	level := headingLevel(heading)
	for i, l := range lines {
		if l != heading {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if lv := headingLevel(lines[j]); lv > 0 && lv <= level {
				end = j
				break
			}
		}
		return strings.Join(lines[i+1:end], "\n")
	}
	t.Fatalf("%s: no section %q", file, heading)
	return ""
}

// headingLevel is the number of #s of a Markdown heading line, 0 for any
// other line.
func headingLevel(line string) int {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || !strings.HasPrefix(line[n:], " ") {
		return 0
	}
	return n
}

// documentedCommands are the shell commands in text's code blocks (lines
// indented four spaces or more, continuation lines joined), without
// trailing comments, spacing collapsed; YAML lines (a first word ending
// in a colon) are not commands.
func documentedCommands(t *testing.T, text string) []string {
	t.Helper()
	var cmds []string
	pending := ""
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "    ") && pending == "" {
			continue
		}
		line = strings.TrimSpace(line)
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if line == "" {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		if first, _, _ := strings.Cut(line, " "); strings.HasSuffix(first, ":") {
			continue
		}
		cmds = append(cmds, normalize(line))
	}
	return cmds
}

// scriptCommands are the script's lines, continuation lines joined, with
// comment lines left out and trailing comments cut, spacing collapsed.
func scriptCommands(t *testing.T, script string) []string {
	t.Helper()
	var lines []string
	pending := ""
	for _, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		lines = append(lines, normalize(line))
	}
	return lines
}

var trailingComment = regexp.MustCompile(`\s+#\s.*$`)

func normalize(line string) string {
	return strings.Join(strings.Fields(trailingComment.ReplaceAllString(line, "")), " ")
}

func fillPlaceholders(cmd string) string {
	for _, p := range runPlaceholders {
		cmd = p.re.ReplaceAllLiteralString(cmd, p.with)
	}
	return cmd
}

// runs counts the script lines that hold cmd as a whole command: what
// precedes it is the start, a space or an operator, and what follows it
// is nothing, a space, a redirection or the end of a list.
func runs(script []string, cmd string) int {
	n := 0
	for _, line := range script {
		for i := 0; ; {
			j := strings.Index(line[i:], cmd)
			if j < 0 {
				break
			}
			end := i + j + len(cmd)
			startOK := i+j == 0 || strings.ContainsRune(" !;(&|$", rune(line[i+j-1]))
			if startOK && (end == len(line) || strings.ContainsRune(" ;)&|>", rune(line[end]))) {
				n++
				break
			}
			i += j + 1
		}
	}
	return n
}
