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
		{"kube-proxy's a lower bound: the ratio an upper one", results.Stat{N: 3, Median: 400, LowerBound: true}, st(20), "< 0.05"},
		{"ours a lower bound: the ratio a lower one", st(20), results.Stat{N: 1, Median: 40, LowerBound: true}, "> 2.00"},
		{"both lower bounds: no ratio", results.Stat{N: 1, Median: 4, LowerBound: true}, results.Stat{N: 1, Median: 4, LowerBound: true}, "—"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Ratio(tc.kp, tc.ours); got != tc.want {
				t.Errorf("Ratio = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTableShowsEveryRowAndADashForAMissingMeasurement(t *testing.T) {
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
		{"ours only, no unit: kube-proxy and the ratio dashed", "| 1,000 | cold start / batched floor | — | 5.94 | — | 1 | " + from + " |"},
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
