package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed files, from this module's folder.
var committed = Options{
	Results:    filepath.Join("..", "..", "benchmarks", "vs-kube-proxy"),
	Benchmarks: filepath.Join("..", "..", "BENCHMARKS.md"),
	SVG:        filepath.Join("..", "..", "benchmarks", "vs-kube-proxy.svg"),
	Check:      true,
}

// TestCommittedBENCHMARKSIsWhatTheCommittedResultsRender is -check over
// the repository: make lint runs it, so a result committed without make
// bench-plot, or a hand edit of the generated text or plot, fails.
func TestCommittedBENCHMARKSIsWhatTheCommittedResultsRender(t *testing.T) {
	if err := Run(committed, io.Discard); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the committed results, BENCHMARKS.md and the plot into
// a temporary folder laid out as the repository.
func copyTree(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	o := Options{
		Results:    filepath.Join(dir, "benchmarks", "vs-kube-proxy"),
		Benchmarks: filepath.Join(dir, "BENCHMARKS.md"),
		SVG:        filepath.Join(dir, "benchmarks", "vs-kube-proxy.svg"),
	}
	if err := os.MkdirAll(o.Results, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(committed.Results)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		copyFile(t, filepath.Join(committed.Results, e.Name()), filepath.Join(o.Results, e.Name()))
	}
	copyFile(t, committed.Benchmarks, o.Benchmarks)
	copyFile(t, committed.SVG, o.SVG)
	return o
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func edit(t *testing.T, path string, f func(string) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(f(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFailsWhenStale(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, o Options)
		says   string // in the error; "" for none
	}{
		{"nothing changed passes", func(*testing.T, Options) {}, ""},
		{"text outside the block may change", func(t *testing.T, o Options) {
			edit(t, o.Benchmarks, func(s string) string { return s + "\nA new paragraph at the end.\n" })
		}, ""},
		{"a hand edit of a figure in the block fails", func(t *testing.T, o Options) {
			edit(t, o.Benchmarks, func(s string) string {
				// The first row's kube-proxy figure, whatever the results say.
				at := strings.Index(s, "\n| 1,000 |")
				if at < 0 {
					t.Fatal("BENCHMARKS.md's table has no row for 1,000 services")
				}
				row, _, _ := strings.Cut(s[at+1:], "\n")
				cells := strings.Split(row, "|")
				cells[3] = " 0.001 "
				return strings.Replace(s, row, strings.Join(cells, "|"), 1)
			})
		}, "BENCHMARKS.md: the text between"},
		{"a newer result committed without make bench-plot fails", func(t *testing.T, o Options) {
			// Dated after any committed result, so that it is the newest.
			copyFile(t, filepath.Join(o.Results, "20261127-214358.json"), filepath.Join(o.Results, "20991231-090000.json"))
		}, "2099-12-31 09:00"},
		{"an edited plot fails", func(t *testing.T, o Options) {
			edit(t, o.SVG, func(s string) string { return strings.Replace(s, "ours", "ours!", 1) })
		}, "vs-kube-proxy.svg is not what"},
		{"a missing plot fails", func(t *testing.T, o Options) {
			if err := os.Remove(o.SVG); err != nil {
				t.Fatal(err)
			}
		}, "no such file"},
		{"markers gone fails, and says which", func(t *testing.T, o Options) {
			edit(t, o.Benchmarks, func(s string) string { return strings.Replace(s, "<!-- end: make bench-plot -->", "", 1) })
		}, "<!-- end: make bench-plot -->"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := copyTree(t)
			tc.change(t, o)
			before, _ := os.ReadFile(o.Benchmarks)
			o.Check = true
			err := Run(o, io.Discard)
			switch {
			case tc.says == "" && err != nil:
				t.Fatalf("-check: %v", err)
			case tc.says != "" && err == nil:
				t.Fatal("-check passed")
			case tc.says != "" && !strings.Contains(err.Error(), tc.says):
				t.Errorf("-check: %v\nwant it to say %q", err, tc.says)
			}
			if after, _ := os.ReadFile(o.Benchmarks); string(after) != string(before) {
				t.Error("-check wrote BENCHMARKS.md")
			}
			if err == nil || !errors.Is(err, ErrStale) {
				return
			}
			// Writing mends what -check found.
			o.Check = false
			if err := Run(o, io.Discard); err != nil {
				t.Fatalf("write: %v", err)
			}
			o.Check = true
			if err := Run(o, io.Discard); err != nil {
				t.Errorf("-check after writing: %v", err)
			}
		})
	}
}

// TestModuleDoesNotRequireTheProxysModule: doc.go's rule that this
// module does not import the proxy's packages holds as long as go.mod
// neither requires nor replaces the main module, which internal/layering
// cannot see from there.
func TestModuleDoesNotRequireTheProxysModule(t *testing.T) {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, gomod string
		want        int
	}{
		{"this go.mod", string(b), 0},
		{"a require of the main module", "module " + proxyModule + "/hack/benchplot\nrequire (\n\t" + proxyModule + " v0.0.0\n)\n", 1},
		{"a replace of it", "module m\nreplace " + proxyModule + " => ../..\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := proxyModuleLines(tc.gomod); len(got) != tc.want {
				t.Errorf("lines naming the proxy's module: %q, want %d", got, tc.want)
			}
		})
	}
}

const proxyModule = "github.com/kube-ipvs-proxy/kube-ipvs-proxy"

// proxyModuleLines are the lines of a go.mod that name the proxy's
// module other than as the prefix of this module's own path.
func proxyModuleLines(gomod string) []string {
	var out []string
	for _, l := range strings.Split(gomod, "\n") {
		f := strings.Fields(l)
		for j, w := range f {
			if (w == proxyModule || strings.HasPrefix(w, proxyModule+"/")) && !(j == 1 && f[0] == "module") {
				out = append(out, l)
			}
		}
	}
	return out
}
