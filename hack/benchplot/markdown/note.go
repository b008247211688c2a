package markdown

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/hack/benchplot/results"
)

// Mark points a cell to the note under the table (WaitNote).
const Mark = "†"

// WaitNote is the note under the table for the runs that stopped
// waiting: for a proxy's table (Scale.TableWaited), or for its own first
// sync once its table was complete (Scale.Waited). Per number of
// services and proxy it says how many rounds stopped and when, and, for
// a row those rounds leave without one exact value, what the newest
// older file that waited measured (Selected.Earlier). "" when no run
// stopped waiting.
func WaitNote(sel []results.Selected, dir string) string {
	var items []string
	tables := false
	for _, s := range sel {
		for _, proxy := range []string{results.KubeProxy, results.Ours} {
			// The least is the nearest to the wait itself: each run
			// stopped at its first reading past it.
			tw, w := s.TableWaited(proxy), s.Waited(proxy)
			if tw.N > 0 {
				tables = true
				items = append(items, fmt.Sprintf("- %s services, %s: %d of %d rounds, stopped %s s after its start, its table not complete.",
					results.Thousands(s.Services), proxy, tw.N, tw.Runs, results.Format(tw.Min)))
			}
			if w.N > 0 {
				items = append(items, fmt.Sprintf("- %s services, %s: %d of %d rounds, stopped %s s after its table was complete.",
					results.Thousands(s.Services), proxy, w.N, w.Runs, results.Format(w.Min)))
			}
			if c := earlier(s, proxy, dir); c != "" && tw.N+w.N > 0 {
				items[len(items)-1] += " " + c
			}
		}
	}
	if len(items) == 0 {
		return ""
	}
	text := Mark + " A run stops waiting for a proxy's own first sync a set time after its table\n" +
		"is complete (`KIP_BENCH_SCALE_FIRST_SYNC_WAIT`): that sync's time is then a lower\n" +
		"bound (\"> \"), and what is taken only after it is not measured in that round\n" +
		"(" + strings.Join(results.AfterFirstSync, "; ") + "):\n" +
		"\"not measured\", or \"(1 of 3)\" for the median of the rounds that have it.\n"
	if tables {
		text += "It stops waiting for the table a set time after the proxy's start\n" +
			"(`KIP_BENCH_SCALE_TABLE_WAIT`): the table's time, the CPU and the peak RSS are\n" +
			"then lower bounds, and nothing taken after the table is measured.\n"
	}
	return text + "The rounds that stopped waiting:\n\n" + strings.Join(items, "\n") + "\n"
}

// earlier cites, for the rows s has no exact value of for proxy (only
// lower bounds, or not measured for want of the first sync), the newest
// older file that measured them: a sentence per file, "" for none.
func earlier(s results.Selected, proxy, dir string) string {
	type cite struct {
		from   results.Selected
		what   []string
		rounds []int
	}
	var cites []cite
	for _, name := range Rows {
		if st := s.Stat(proxy, name); st.N > st.Bounded || st.N == 0 && st.NotYet == 0 {
			continue
		}
		e, st, ok := s.Earlier(proxy, name)
		if !ok {
			continue
		}
		i := slices.IndexFunc(cites, func(c cite) bool { return c.from.From.Name == e.From.Name })
		if i < 0 {
			cites = append(cites, cite{from: e})
			i = len(cites) - 1
		}
		v := results.Format(st.Median)
		if st.Unit != "" {
			v += " " + st.Unit
		}
		cites[i].what = append(cites[i].what, name+" "+v)
		cites[i].rounds = append(cites[i].rounds, st.N)
	}
	var out []string
	for _, c := range cites {
		link := fmt.Sprintf("[%s](%s)", c.from.From.When.Format("2006-01-02 15:04"), path.Join(dir, c.from.From.Name))
		if rs := slices.Compact(slices.Clone(c.rounds)); len(rs) == 1 {
			out = append(out, fmt.Sprintf("An earlier run that waited for it measured, in %s (%s): %s.", rounds(rs[0]), link, strings.Join(c.what, "; ")))
			continue
		}
		for i := range c.what {
			c.what[i] += " (" + rounds(c.rounds[i]) + ")"
		}
		out = append(out, fmt.Sprintf("An earlier run that waited for it measured (%s): %s.", link, strings.Join(c.what, "; ")))
	}
	return strings.Join(out, " ")
}

// rounds is n rounds, in words.
func rounds(n int) string {
	if n == 1 {
		return "1 round"
	}
	return fmt.Sprintf("%d rounds", n)
}
