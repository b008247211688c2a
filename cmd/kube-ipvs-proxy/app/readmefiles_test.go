package app

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPackageREADMEFiles: a package README's "## Files" table is its map
// of the package, as README's Layout is the repository's, and is held to
// the tree the same way. In every folder of Go files whose README.md has
// a Files section, each backquoted name in the first cell of its table
// rows (relative to the folder; a name with * is a glob) names a file
// that is there, and every production .go file of the folder (not
// _test.go; not doc.go, the package comment every package has, checked
// by internal/layering) is named by one. The files come from git (tracked or not
// ignored), as Layout's do.
func TestPackageREADMEFiles(t *testing.T) {
	byDir := map[string][]string{} // folder → its files' names
	for _, f := range repoFiles(t) {
		byDir[path.Dir(f)] = append(byDir[path.Dir(f)], path.Base(f))
	}
	checked := 0
	for dir, names := range byDir {
		if !slices.Contains(names, "README.md") || !slices.ContainsFunc(names, isGoFile) {
			continue
		}
		readme := path.Join(dir, "README.md")
		listed, ok := filesTable(t, readme, readRepoFile(t, readme))
		if !ok {
			continue
		}
		checked++
		for _, p := range listed {
			if !tableNameExists(dir, p) {
				t.Errorf("%s: Files names %s, which is not in %s/", readme, p, dir)
			}
		}
		for _, n := range names {
			if !isGoFile(n) || strings.HasSuffix(n, "_test.go") || n == "doc.go" {
				continue
			}
			if !slices.ContainsFunc(listed, func(p string) bool { ok, _ := path.Match(p, n); return ok }) {
				t.Errorf("%s: Files does not name %s", readme, n)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package README has a ## Files section: the check checks nothing")
	}
}

func isGoFile(name string) bool { return strings.HasSuffix(name, ".go") }

// filesTable returns the backquoted names of the first cells of the table
// rows in readme's "## Files" section, and whether it has one.
func filesTable(t *testing.T, name, readme string) ([]string, bool) {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Files\n")
	if !ok {
		return nil, false
	}
	section, _, _ = strings.Cut(section, "\n## ")
	quoted := regexp.MustCompile("`([^`]+)`")
	var names []string
	for _, l := range strings.Split(section, "\n") {
		cells := strings.Split(l, "|")
		if !strings.HasPrefix(l, "|") || len(cells) < 3 || strings.Trim(cells[1], " -") == "" || strings.TrimSpace(cells[1]) == "file" {
			continue
		}
		ms := quoted.FindAllStringSubmatch(cells[1], -1)
		if len(ms) == 0 {
			t.Errorf("%s: Files row without a backquoted file name: %s", name, l)
		}
		for _, m := range ms {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		t.Errorf("%s: the Files section has no table rows", name)
	}
	return names, true
}

// tableNameExists reports whether a Files name, relative to dir, is a
// file or folder there (a glob: matches one).
func tableNameExists(dir, name string) bool {
	p := filepath.Join(repoRoot, filepath.FromSlash(dir), filepath.FromSlash(name))
	if strings.Contains(name, "*") {
		ms, err := filepath.Glob(p)
		return err == nil && len(ms) > 0
	}
	_, err := os.Stat(p)
	return err == nil
}
