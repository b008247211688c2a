package results

import (
	"fmt"
	"slices"
)

// The proxies' labels in make bench-vs-kube-proxy's files.
const (
	KubeProxy = "kube-proxy"
	Ours      = "ours"
)

// The names of the measurements BENCHMARKS.md's table shows, as a run
// reports them: integration/benchscale adds them under these names and
// hack/benchplot looks them up by them.
const (
	TableComplete = "IPVS table complete, from process start"
	CPUUntilTable = "CPU until the table is complete"
	OwnFirstSync  = "own first sync done, from process start"
	SettledRSS    = "memory after the first sync, settled: RSS"
	PeakRSS       = "memory: peak RSS (VmHWM) by then"
	ChangeP50     = "endpoint change → kernel: p50"
	// ColdOverBatched is ours' TableComplete over the same table
	// written again, batched, into a fresh namespace: a measure of our
	// cold start alone, which a kube-proxy run never reports.
	ColdOverBatched = "cold start / batched floor"

	// OwnFirstSyncNotYet is reported in place of OwnFirstSync by a run
	// that stopped waiting for the proxy's own first sync
	// (KIP_BENCH_SCALE_FIRST_SYNC_WAIT after its table was complete):
	// the time waited, from process start, a lower bound. Such a run
	// reports none of AfterFirstSync.
	OwnFirstSyncNotYet = "own first sync not done yet, from process start (a lower bound)"

	// TableNotYet, CPUNotYet and PeakRSSNotYet are reported in place of
	// TableComplete, CPUUntilTable and PeakRSS by a run that stopped
	// waiting for the proxy's table (KIP_BENCH_SCALE_TABLE_WAIT after its
	// start): the time waited, the CPU and the peak RSS by then, each a
	// lower bound. Such a run reports nothing taken after the table
	// (OwnFirstSync, AfterFirstSync).
	TableNotYet   = "IPVS table not complete yet, from process start (a lower bound)"
	CPUNotYet     = "CPU by then, the table not complete (a lower bound)"
	PeakRSSNotYet = "memory: peak RSS (VmHWM) by then, the table not complete (a lower bound)"
)

// AfterFirstSync are the measurements a run takes only once the proxy's
// own first sync has ended: the memory when quiet after it, and endpoint
// changes, which would otherwise wait for it.
var AfterFirstSync = []string{SettledRSS, ChangeP50}

// AfterTable are the measurements a run takes only once the proxy's
// table is complete: its own first sync, what follows it, and our cold
// start over the floor.
var AfterTable = append([]string{OwnFirstSync, ColdOverBatched}, AfterFirstSync...)

// OursOnly are the measurements of our cold start alone: a kube-proxy
// run has none of them, by design, not for want of time.
var OursOnly = []string{ColdOverBatched}

// Report is one result file.
type Report struct {
	Header []string `json:"header"` // when, on what, which binaries, which phases
	Scales []Scale  `json:"scales"`
}

// Scale is the runs of one number of services.
type Scale struct {
	Services  int    `json:"services"`
	LoadAfter string `json:"loadAfter"` // the host's load average after the runs
	Runs      []Run  `json:"runs"`
}

// Run is one proxy binary measured once at one scale.
type Run struct {
	Proxy        string        `json:"proxy"` // its label: tree, base; kube-proxy, ours
	Round        int           `json:"round"`
	Services     int           `json:"services"`
	Endpoints    int           `json:"endpoints"`
	Measurements []Measurement `json:"measurements"`
}

// Measurement is one number of a run.
type Measurement struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Add appends a measurement.
func (r *Run) Add(name string, value float64, unit string) {
	r.Measurements = append(r.Measurements, Measurement{Name: name, Value: value, Unit: unit})
}

// Median is the middle value of vs, or the mean of the two middle ones
// for an even count; 0 for none. vs is not changed.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}

// Format prints a value as every table of results does: whole numbers
// whole, three significant digits under 10, fewer decimals above.
func Format(v float64) string {
	switch {
	case v == float64(int64(v)):
		return fmt.Sprintf("%d", int64(v))
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
