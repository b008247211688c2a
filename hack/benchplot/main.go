package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/hack/benchplot/chart"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/hack/benchplot/markdown"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/hack/benchplot/results"
)

// Options are the command line.
type Options struct {
	Results    string // the folder of result files
	Benchmarks string // BENCHMARKS.md
	SVG        string // the plot to write
	Check      bool   // compare instead of writing
}

// ErrStale is returned by -check when a file differs from what the
// results render.
var ErrStale = errors.New("stale")

func main() {
	var o Options
	flag.StringVar(&o.Results, "results", "benchmarks/vs-kube-proxy", "folder of make bench-vs-kube-proxy's <YYYYMMDD-HHMMSS>.json files")
	flag.StringVar(&o.Benchmarks, "benchmarks", "BENCHMARKS.md", "the Markdown file whose block between the make bench-plot markers is written")
	flag.StringVar(&o.SVG, "svg", "benchmarks/vs-kube-proxy.svg", "the plot to write")
	flag.BoolVar(&o.Check, "check", false, "write nothing; exit 1 if -benchmarks' block or -svg differs from what -results render")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "benchplot: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := Run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

// Run renders the table and the plot from o.Results, and writes them
// into o.Benchmarks and o.SVG, or with o.Check compares them. It says on
// out what it wrote or checked.
func Run(o Options, out io.Writer) error {
	files, err := results.Load(os.DirFS(o.Results))
	if err != nil {
		return fmt.Errorf("%s: %w", o.Results, err)
	}
	sel := results.Newest(files)
	links, err := linksFrom(o)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(o.Benchmarks)
	if err != nil {
		return fmt.Errorf("read benchmarks: %w", err)
	}
	block := markdown.Section(sel, links)
	newDoc, err := markdown.Replace(string(doc), block)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Benchmarks, err)
	}
	svg, err := chart.SVG(sel)
	if err != nil {
		return err
	}
	if o.Check {
		return check(o, string(doc), newDoc, svg, out)
	}
	if err := os.WriteFile(o.Benchmarks, []byte(newDoc), 0o644); err != nil {
		return fmt.Errorf("write benchmarks: %w", err)
	}
	if err := os.WriteFile(o.SVG, svg, 0o644); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	fmt.Fprintf(out, "wrote %s (%d scales from %d result files) and %s\n", o.Benchmarks, len(sel), len(files), o.SVG)
	return nil
}

// check compares the files on disk with what the results render.
func check(o Options, doc, want string, svg []byte, out io.Writer) error {
	var stale []string
	if doc != want {
		old, _ := markdown.Block(doc) // want was spliced into doc, so the markers are there
		stale = append(stale, fmt.Sprintf("%s: the text between %s and %s is not what %s renders (%s)",
			o.Benchmarks, markdown.Begin, markdown.End, o.Results, firstDiff(old, mustBlock(want))))
	}
	if have, err := os.ReadFile(o.SVG); err != nil || !bytes.Equal(have, svg) {
		why := "its bytes differ"
		if err != nil {
			why = err.Error()
		}
		stale = append(stale, fmt.Sprintf("%s is not what %s renders (%s)", o.SVG, o.Results, why))
	}
	if len(stale) > 0 {
		return fmt.Errorf("%w: %s; run make bench-plot and commit what it writes", ErrStale, strings.Join(stale, "; "))
	}
	fmt.Fprintf(out, "%s and %s are current with %s\n", o.Benchmarks, o.SVG, o.Results)
	return nil
}

func mustBlock(doc string) string {
	b, err := markdown.Block(doc)
	if err != nil {
		panic(err) // doc came out of Replace
	}
	return b
}

// firstDiff names the first line where have and want differ.
func firstDiff(have, want string) string {
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := range max(len(h), len(w)) {
		var hl, wl string
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl {
			return fmt.Sprintf("its line %d is %q, want %q", i+1, hl, wl)
		}
	}
	return "they differ"
}

// linksFrom makes the results folder and the plot relative to
// BENCHMARKS.md's folder, as its links need.
func linksFrom(o Options) (markdown.Links, error) {
	base := filepath.Dir(o.Benchmarks)
	res, err := filepath.Rel(base, o.Results)
	if err != nil {
		return markdown.Links{}, fmt.Errorf("link results from %s: %w", o.Benchmarks, err)
	}
	svg, err := filepath.Rel(base, o.SVG)
	if err != nil {
		return markdown.Links{}, fmt.Errorf("link plot from %s: %w", o.Benchmarks, err)
	}
	return markdown.Links{Results: filepath.ToSlash(res), SVG: filepath.ToSlash(svg)}, nil
}
