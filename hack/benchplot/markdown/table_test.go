package markdown

import (
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/hack/benchplot/results"
)

func TestRatioIsOursOverKubeProxysMedianOrADash(t *testing.T) {
	st := func(v float64) results.Stat { return results.Stat{N: 1, Median: v} }
	for _, tc := range []struct {
		name     string
		kp, ours results.Stat
		want     string
	}{
		{"ours faster is below 1", st(15.33513738), st(3.98457059), "0.26"},
		{"ours slower is above 1", st(166.5), st(186.05), "1.12"},
		{"equal is 1", st(2), st(2), "1.00"},
		{"kube-proxy missing", results.Stat{}, st(5.9), "—"},
		{"ours missing", st(5.9), results.Stat{}, "—"},
		{"kube-proxy 0 divides by nothing", st(0), st(3), "—"},
		{"kube-proxy's a lower bound: the ratio an upper one", results.Stat{N: 3, Median: 400, Bounded: 2}, st(20), "< 0.05"},
		{"ours a lower bound: the ratio a lower one", st(20), results.Stat{N: 1, Median: 40, Bounded: 1}, "> 2.00"},
		{"both lower bounds: no ratio", results.Stat{N: 1, Median: 4, Bounded: 1}, results.Stat{N: 1, Median: 4, Bounded: 1}, "—"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Ratio(tc.kp, tc.ours); got != tc.want {
				t.Errorf("Ratio = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTableShowsEveryRowAndADashOnlyForAMeasurementMissingWithoutAReason(t *testing.T) {
	when := time.Date(2026, 11, 27, 21, 43, 58, 0, time.UTC)
	sel := []results.Selected{{
		From: results.File{Name: "20261127-214358.json", When: when},
		Scale: results.Scale{Services: 1000, Runs: []results.Run{
			{Proxy: results.KubeProxy, Measurements: []results.Measurement{
				{Name: results.TableComplete, Value: 15.33513738, Unit: "s"},
				{Name: results.PeakRSS, Value: 88.21875, Unit: "MiB"},
			}},
			{Proxy: results.Ours, Measurements: []results.Measurement{
				{Name: results.TableComplete, Value: 3.98457059, Unit: "s"},
				{Name: results.ColdOverBatched, Value: 5.939601457343237},
			}},
		}},
	}}
	got := Table(sel, "benchmarks/vs-kube-proxy")
	from := "[2026-11-27 21:43](benchmarks/vs-kube-proxy/20261127-214358.json)"
	for _, tc := range []struct{ name, row string }{
		{"both proxies: medians and ratio", "| 1,000 | IPVS table complete, from process start (s) | 15.3 | 3.98 | 0.26 | 1 | " + from + " |"},
		{"kube-proxy only: ours and the ratio dashed", "| 1,000 | memory: peak RSS (VmHWM) by then (MiB) | 88.2 | — | — | 1 | " + from + " |"},
		{"ours only, no unit: kube-proxy's not applicable, the ratio dashed", "| 1,000 | cold start / batched floor | n/a (ours only) | 5.94 | — | 1 | " + from + " |"},
		{"neither: a row of dashes, not a missing row", "| 1,000 | own first sync done, from process start | — | — | — | 1 | " + from + " |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(got, tc.row+"\n") {
				t.Errorf("table lacks the row\n%s\n in\n%s", tc.row, got)
			}
		})
	}
	if rows := strings.Count(got, "\n| 1,000 |"); rows != len(Rows) {
		t.Errorf("%d rows for 1,000 services, want %d", rows, len(Rows))
	}
}

// A cell without a value says why, from the files: a measurement of our
// cold start alone is not applicable to kube-proxy, and one taken only
// after the proxy's own first sync is not measured when the run stopped
// waiting for that sync; the mark points to the note that says how long
// it waited. Only a measurement missing for no recorded reason is a dash.
func TestACellWithAFirstSyncLowerBoundSaysWhyNotADash(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   results.Stat
		want string
	}{
		{"not measured: every round stopped waiting for the first sync", results.Stat{Runs: 3, NotYet: 3}, "not measured " + Mark},
		{"measured in some rounds: the median says of how many", results.Stat{N: 1, Median: 89.359375, Runs: 3, NotYet: 2}, "89.4 (1 of 3) " + Mark},
		{"the first sync itself: a lower bound, marked", results.Stat{N: 3, Median: 182.29, Bounded: 3, Runs: 3}, "> 182 " + Mark},
		{"a measurement of our cold start alone: not applicable", results.Stat{Runs: 3, NotApplicable: true}, "n/a (ours only)"},
		{"missing for no recorded reason: a dash", results.Stat{Runs: 3}, "—"},
		{"measured in every round: the median alone", results.Stat{N: 3, Median: 61.6, Runs: 3}, "61.6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Cell(tc.st); got != tc.want {
				t.Errorf("Cell(%+v) = %q, want %q", tc.st, got, tc.want)
			}
		})
	}
}

// The table over a scale where kube-proxy's first sync outlasted the
// wait in every round: its cells after the first sync say why, and the
// note under the table says how long the run waited and cites the
// newest older file that measured them.
func TestTableNotesAFirstSyncTheRunStoppedWaitingFor(t *testing.T) {
	kp := func(round int, table, bound float64) results.Run {
		return results.Run{Proxy: results.KubeProxy, Round: round, Measurements: []results.Measurement{
			{Name: results.TableComplete, Value: table, Unit: "s"},
			{Name: results.OwnFirstSyncNotYet, Value: bound, Unit: "s"},
			{Name: results.PeakRSS, Value: 156, Unit: "MiB"},
		}}
	}
	ours := func(round int) results.Run {
		return results.Run{Proxy: results.Ours, Round: round, Measurements: []results.Measurement{
			{Name: results.TableComplete, Value: 18, Unit: "s"},
			{Name: results.OwnFirstSync, Value: 18.5, Unit: "s"},
			{Name: results.SettledRSS, Value: 88.5, Unit: "MiB"},
			{Name: results.ChangeP50, Value: 40.4, Unit: "ms"},
		}}
	}
	older := results.File{Name: "20261127-212405.json", When: time.Date(2026, 11, 27, 21, 24, 5, 0, time.UTC),
		Report: results.Report{Scales: []results.Scale{{Services: 5000, Runs: []results.Run{{Proxy: results.KubeProxy, Measurements: []results.Measurement{
			{Name: results.OwnFirstSync, Value: 675.7, Unit: "s"},
			{Name: results.SettledRSS, Value: 157.2, Unit: "MiB"},
			{Name: results.ChangeP50, Value: 7021.5, Unit: "ms"},
		}}}}}}}
	sel := []results.Selected{{
		From:  results.File{Name: "20261128-020135.json", When: time.Date(2026, 11, 28, 2, 1, 35, 0, time.UTC)},
		Older: []results.File{older},
		Scale: results.Scale{Services: 5000, Runs: []results.Run{
			kp(0, 67.9, 188.1), ours(0), ours(1), kp(1, 57.9, 178.2), kp(2, 61.6, 182.3), ours(2),
		}},
	}}
	got := Table(sel, "benchmarks/vs-kube-proxy")
	for _, tc := range []struct{ name, want string }{
		{"the first sync a lower bound, marked", "| own first sync done, from process start (s) | > 182 " + Mark + " | 18.5 | < 0.10 |"},
		{"settled RSS not measured, marked", "| memory after the first sync, settled: RSS (MiB) | not measured " + Mark + " | 88.5 | — |"},
		{"the endpoint change not measured, marked", "| endpoint change → kernel: p50 (ms) | not measured " + Mark + " | 40.4 | — |"},
		{"the floor not applicable", "| cold start / batched floor | n/a (ours only) | — | — |"},
		{"the note: which rounds and the wait, from the lower bound less the table complete",
			"- 5,000 services, kube-proxy: 3 of 3 rounds, stopped 120 s after its table was complete."},
		{"the note cites the older file that measured them, as another run",
			"An earlier run that waited for it measured, in 1 round ([2026-11-27 21:24](benchmarks/vs-kube-proxy/20261127-212405.json)): " +
				"own first sync done, from process start 676 s; memory after the first sync, settled: RSS 157 MiB; endpoint change → kernel: p50 7022 ms.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(got, tc.want) {
				t.Errorf("table lacks\n%s\nin\n%s", tc.want, got)
			}
		})
	}
	if strings.Contains(got, "| — | 18") || strings.Contains(got, "| — | 88.5") || strings.Contains(got, "| — | 40.4") {
		t.Errorf("a kube-proxy cell is a bare dash:\n%s", got)
	}
	if WaitNote(sel[:0], "x") != "" {
		t.Error("a note without any run that stopped waiting")
	}
}

// The table over a scale where kube-proxy's table outlasted the wait in
// every round: its table's time, CPU and peak RSS are lower bounds, what
// comes after the table says why it is missing, and the note says the
// wait was for the table, from the start.
func TestTableNotesATableTheRunStoppedWaitingFor(t *testing.T) {
	kp := func(round int, waited float64) results.Run {
		return results.Run{Proxy: results.KubeProxy, Round: round, Measurements: []results.Measurement{
			{Name: results.TableNotYet, Value: waited, Unit: "s"},
			{Name: results.CPUNotYet, Value: waited * 0.9, Unit: "s"},
			{Name: results.PeakRSSNotYet, Value: 1210, Unit: "MiB"},
		}}
	}
	ours := func(round int) results.Run {
		return results.Run{Proxy: results.Ours, Round: round, Measurements: []results.Measurement{
			{Name: results.TableComplete, Value: 120, Unit: "s"},
			{Name: results.CPUUntilTable, Value: 150, Unit: "s"},
			{Name: results.OwnFirstSync, Value: 121, Unit: "s"},
			{Name: results.PeakRSS, Value: 480, Unit: "MiB"},
			{Name: results.SettledRSS, Value: 400, Unit: "MiB"},
		}}
	}
	sel := []results.Selected{{
		From:  results.File{Name: "20261201-100000.json", When: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
		Scale: results.Scale{Services: 50000, Runs: []results.Run{kp(0, 900.4), ours(0), ours(1), kp(1, 901.2), kp(2, 900.9), ours(2)}},
	}}
	got := Table(sel, "benchmarks/vs-kube-proxy")
	for _, tc := range []struct{ name, want string }{
		{"the table's time a lower bound, the ratio an upper one", "| IPVS table complete, from process start (s) | > 901 " + Mark + " | 120 | < 0.13 |"},
		{"the CPU a lower bound", "| CPU until the table is complete (s) | > 811 " + Mark + " | 150 | < 0.19 |"},
		{"the peak RSS a lower bound", "| memory: peak RSS (VmHWM) by then (MiB) | > 1210 " + Mark + " | 480 | < 0.40 |"},
		{"the first sync not measured", "| own first sync done, from process start (s) | not measured " + Mark + " | 121 | — |"},
		{"settled RSS not measured", "| memory after the first sync, settled: RSS (MiB) | not measured " + Mark + " | 400 | — |"},
		{"the note: the table's wait, from the start", "- 50,000 services, kube-proxy: 3 of 3 rounds, stopped 900 s after its start, its table not complete."},
		{"the note names the knob", "(`KIP_BENCH_SCALE_TABLE_WAIT`)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(got, tc.want) {
				t.Errorf("table lacks\n%s\nin\n%s", tc.want, got)
			}
		})
	}
}
