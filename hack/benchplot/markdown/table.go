package markdown

import (
	"fmt"
	"path"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/hack/benchplot/results"
)

// Rows are the table's measurements, in its order, for each number of
// services: the ones BENCHMARKS.md's targets and caveats are about.
var Rows = []string{
	results.TableComplete,
	results.CPUUntilTable,
	results.OwnFirstSync,
	results.SettledRSS,
	results.PeakRSS,
	results.ChangeP50,
	results.ColdOverBatched,
}

// Links are paths relative to BENCHMARKS.md's folder, for its links.
type Links struct {
	Results string // the folder of the result files
	SVG     string // the plot
}

// Section is the whole text between the markers: what it is, the table,
// and the plot below it.
func Section(sel []results.Selected, l Links) string {
	var b strings.Builder
	b.WriteString("<!-- Written by `make bench-plot` (hack/benchplot) from " + l.Results + "/*.json; do not edit by hand. -->\n\n")
	b.WriteString("Medians over rounds; for each number of services, the newest result file\n")
	b.WriteString("that holds it, in [" + l.Results + "/](" + l.Results + "/)\n")
	b.WriteString("(the older files stay there as the record). ours/kube-proxy below 1: ours\n")
	b.WriteString("took less.\n\n")
	b.WriteString(Table(sel, l.Results))
	b.WriteString("\n![IPVS table complete and CPU until then, kube-proxy and ours, by number of services: medians, whiskers min–max over rounds](" + l.SVG + ")\n")
	return b.String()
}

// Table renders one row per number of services × Rows: each proxy's
// median, the ratio, the rounds and the file (linked under dir) it came
// from; then the note the cells marked Mark point to (WaitNote). A
// cell says why it lacks a value: "n/a (ours only)" for a measurement of
// our cold start alone, "not measured" for one taken only after a first
// sync or a table the run stopped waiting for; a dash is left only where the files give no
// reason. A dashed ratio means no ratio.
func Table(sel []results.Selected, dir string) string {
	var b strings.Builder
	b.WriteString("| services | measurement | kube-proxy | ours | ours/kube-proxy | rounds | from |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, s := range sel {
		from := fmt.Sprintf("[%s](%s)", s.From.When.Format("2006-01-02 15:04"), path.Join(dir, s.From.Name))
		for _, name := range Rows {
			kp, ours := s.Stat(results.KubeProxy, name), s.Stat(results.Ours, name)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %s |\n",
				results.Thousands(s.Services), label(name, kp, ours), Cell(kp), Cell(ours), Ratio(kp, ours), s.Rounds(), from)
		}
	}
	if note := WaitNote(sel, dir); note != "" {
		b.WriteString("\n" + note)
	}
	return b.String()
}

// label is the measurement's name with the unit either proxy reported.
func label(name string, stats ...results.Stat) string {
	for _, st := range stats {
		if st.N > 0 && st.Unit != "" {
			return name + " (" + st.Unit + ")"
		}
	}
	return name
}

// Cell is one proxy's median, or why there is none. Mark points a
// value that a wait (for the table or the first sync) bounds or thins
// to WaitNote:
// a lower bound, a median of fewer rounds than the proxy ran ("(1 of
// 3)"), or none.
func Cell(st results.Stat) string {
	switch {
	case st.NotApplicable:
		return "n/a (" + results.Ours + " only)"
	case st.N == 0 && st.NotYet > 0:
		return "not measured " + Mark
	case st.N == 0:
		return "—"
	case st.LowerBound():
		return "> " + results.Format(st.Median) + " " + Mark
	case st.NotYet > 0:
		return fmt.Sprintf("%s (%d of %d) %s", results.Format(st.Median), st.N, st.Runs, Mark)
	}
	return results.Format(st.Median)
}

// Ratio is ours' median over kube-proxy's to two decimals, or a dash when
// either is missing or kube-proxy's is 0. A lower bound of kube-proxy's
// makes it an upper bound ("< "), one of ours a lower bound ("> "), and
// both a dash.
func Ratio(kp, ours results.Stat) string {
	if kp.N == 0 || ours.N == 0 || kp.Median == 0 || kp.LowerBound() && ours.LowerBound() {
		return "—"
	}
	r := fmt.Sprintf("%.2f", ours.Median/kp.Median)
	switch {
	case kp.LowerBound():
		return "< " + r
	case ours.LowerBound():
		return "> " + r
	}
	return r
}
