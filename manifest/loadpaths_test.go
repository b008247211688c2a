package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func node(name string) string {
	return "apiVersion: v1\nkind: Node\nmetadata:\n  name: " + name + "\n"
}

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b.yaml":        node("b"),
		"a.json":        `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}`,
		"c.yml":         node("c") + "---\n" + node("a"),
		"d.txt":         node("txt"),
		"e.yaml.bak":    node("bak"),
		"sub/f.yaml":    node("sub"),
		"dir.yaml/g.ym": node("g"),
		"single.txt":    node("single"),
		"empty/.keep":   "",
		"notes/a.txt":   "hello",
		"notes/b.md":    "# hello",
	})
	if err := os.Mkdir(filepath.Join(dir, "none"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(dir, "bad"), map[string]string{
		"1.yaml": node("x"),
		"2.yaml": node("y") + "---\nmetadata: x: y\n",
		"3.yaml": node("z"),
	})
	missing := filepath.Join(dir, "missing.yaml")
	tests := []struct {
		name     string
		paths    []string
		want     []string
		warnings []string
		wantErr  string
	}{{
		name:  "directory reads only yaml, yml and json files, sorted, non-recursive",
		paths: []string{dir},
		want:  []string{"Node /b", "Node /c", "Node /a"},
		warnings: []string{
			filepath.Join(dir, "c.yml") + ":6: Node a: duplicate of " + filepath.Join(dir, "a.json") + ":1; this one wins",
		},
	}, {
		name:  "explicit file is read whatever its extension, then a directory",
		paths: []string{filepath.Join(dir, "single.txt"), filepath.Join(dir, "empty")},
		want:  []string{"Node /single"},
		warnings: []string{
			filepath.Join(dir, "empty") + ": no *.yaml, *.yml or *.json file in this directory (1 other entries); nothing read",
		},
	}, {
		name:  "a directory of non-manifests warns",
		paths: []string{filepath.Join(dir, "sub"), filepath.Join(dir, "notes")},
		want:  []string{"Node /sub"},
		warnings: []string{
			filepath.Join(dir, "notes") + ": no *.yaml, *.yml or *.json file in this directory (2 other entries); nothing read",
		},
	}, {
		name:  "an empty directory warns",
		paths: []string{filepath.Join(dir, "none")},
		warnings: []string{
			filepath.Join(dir, "none") + ": no *.yaml, *.yml or *.json file in this directory (0 other entries); nothing read",
		},
	}, {
		name:  "no paths load nothing",
		paths: nil,
	}, {
		name:    "a missing file is a ParseError naming it once, with no line",
		paths:   []string{filepath.Join(dir, "b.yaml"), missing},
		wantErr: missing + ": no such file or directory",
	}, {
		name:    "first parse error stops loading",
		paths:   []string{filepath.Join(dir, "bad")},
		wantErr: filepath.Join(dir, "bad", "2.yaml") + ": 6: mapping values are not allowed in this context",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, warnings, err := LoadPaths(tc.paths)
			if tc.wantErr != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || err.Error() != tc.wantErr {
					t.Fatalf("LoadPaths() error = %v, want *ParseError %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadPaths() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, summary(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, warningStrings(warnings)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
