package app

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMELayout: README's Layout table names every folder a reader
// looks for, and nothing that is not there. The folders come from the
// tree (git's files, tracked or not ignored), not from a list, so a
// package added or moved fails here until its row is:
//   - every Go package of the main module (testdata and nested modules
//     left out), by its own path;
//   - every folder directly under hack/, by its own path (a nested
//     module's inside is its README's);
//   - every top-level folder, by itself or a folder under it.
//
// Each row's first cell lists backquoted paths from the repository root;
// a folder ends with "/". Each must exist and appear once.
func TestREADMELayout(t *testing.T) {
	rows := layoutPaths(t, readRepoFile(t, "README.md"))
	files := repoFiles(t)

	listed := map[string]int{}
	for _, p := range rows {
		listed[p]++
	}
	for p, n := range listed {
		if n > 1 {
			t.Errorf("Layout names %s %d times", p, n)
		}
		fi, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p)))
		switch {
		case err != nil:
			t.Errorf("Layout names %s, which does not exist", p)
		case strings.HasSuffix(p, "/") && !fi.IsDir():
			t.Errorf("Layout names %s as a folder; it is a file", p)
		case !strings.HasSuffix(p, "/") && fi.IsDir():
			t.Errorf("Layout names the folder %s without its trailing /", p)
		}
	}

	own, top := layoutRequired(files)
	for _, d := range own {
		if listed[d+"/"] == 0 {
			t.Errorf("Layout has no row for %s/", d)
		}
	}
	for _, d := range top {
		if !slices.ContainsFunc(rows, func(p string) bool { return strings.HasPrefix(p, d+"/") }) {
			t.Errorf("Layout names neither %s/ nor a folder under it", d)
		}
	}
}

// layoutPaths returns the backquoted paths of the first cells of the
// Layout section's table rows.
func layoutPaths(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		t.Fatal("README has no ## Layout section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	quoted := regexp.MustCompile("`([^`]+)`")
	var paths []string
	rows := 0
	for _, l := range strings.Split(section, "\n") {
		cells := strings.Split(l, "|")
		if !strings.HasPrefix(l, "|") || len(cells) < 3 || strings.HasPrefix(l, "|---") || strings.TrimSpace(cells[1]) == "path" {
			continue
		}
		rows++
		ms := quoted.FindAllStringSubmatch(cells[1], -1)
		if len(ms) == 0 {
			t.Errorf("Layout row without a backquoted path: %s", l)
		}
		for _, m := range ms {
			paths = append(paths, m[1])
		}
	}
	if rows == 0 {
		t.Fatal("README's Layout section has no table rows")
	}
	return paths
}

// repoFiles lists the repository's files, tracked or untracked but not
// ignored, with slash-separated paths from its root.
func repoFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files (the Layout check reads the tree from git): %v", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		// A file deleted but not yet committed is still listed.
		if len(f) > 0 {
			if _, err := os.Stat(filepath.Join(repoRoot, string(f))); err == nil {
				files = append(files, string(f))
			}
		}
	}
	return files
}

// layoutRequired returns the folders that need a row of their own (Go
// packages of the main module, hack/'s folders) and the top-level
// folders, sorted.
func layoutRequired(files []string) (own, top []string) {
	var modules []string // nested modules' roots
	for _, f := range files {
		if d := path.Dir(f); path.Base(f) == "go.mod" && d != "." {
			modules = append(modules, d)
		}
	}
	nested := func(dir string) bool {
		return slices.ContainsFunc(modules, func(m string) bool { return dir == m || strings.HasPrefix(dir, m+"/") })
	}
	ignoredByGo := func(dir string) bool {
		return slices.ContainsFunc(strings.Split(dir, "/"), func(c string) bool {
			return c == "testdata" || strings.HasPrefix(c, ".") || strings.HasPrefix(c, "_")
		})
	}
	for _, f := range files {
		parts := strings.Split(f, "/")
		if len(parts) < 2 {
			continue
		}
		top = append(top, parts[0])
		if parts[0] == "hack" && len(parts) > 2 {
			own = append(own, "hack/"+parts[1])
		}
		if d := path.Dir(f); strings.HasSuffix(f, ".go") && !nested(d) && !ignoredByGo(d) {
			own = append(own, d)
		}
	}
	slices.Sort(own)
	slices.Sort(top)
	return slices.Compact(own), slices.Compact(top)
}
