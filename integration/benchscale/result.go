package benchscale

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/benchscale/results"
)

// ResultPrefix starts the console line on which the VM half reports one
// measured run as JSON; the host half collects these lines.
const ResultPrefix = "BENCH-SCALE-RESULT "

// Run is one proxy binary measured once at one scale, as the result
// files hold it (package results, the schema hack/benchplot reads too).
type Run = results.Run

// resultLine is the run as a ResultPrefix console line.
func resultLine(r Run) string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // plain data
	}
	return ResultPrefix + string(b)
}

// ProfilePrefix starts the console line on which the VM half reports a
// profile (KIP_BENCH_SCALE_PROFILE=1): a Profile as JSON.
const ProfilePrefix = "BENCH-SCALE-PROFILE "

// Profile is a profile of one run (pprof's gzipped protobuf): a heap
// profile, or a window of the CPU profile.
type Profile struct {
	Proxy string `json:"proxy"`
	Round int    `json:"round"`
	When  string `json:"when"`
	Kind  string `json:"kind,omitempty"` // "heap" (the default), "cpu" or "trace" (a Go execution trace)
	Pprof []byte `json:"pprof"`
}

// ParseProfiles reads the ProfilePrefix lines of a console log.
func ParseProfiles(console string) ([]Profile, error) {
	return parseLines[Profile](console, ProfilePrefix, "profile")
}

// ParseRuns reads the ResultPrefix lines of a console log.
func ParseRuns(console string) ([]Run, error) {
	return parseLines[Run](console, ResultPrefix, "result")
}

// parseLines decodes the JSON after prefix on each console line that has it.
func parseLines[T any](console, prefix, what string) ([]T, error) {
	var out []T
	for _, l := range strings.Split(console, "\n") {
		_, js, ok := strings.Cut(l, prefix)
		if !ok {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(strings.TrimSpace(js)), &v); err != nil {
			return nil, fmt.Errorf("%s line %.200q: %w", what, l, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Table renders runs of one scale side by side: one row per measurement
// (in the order the first run reported them), one column per run, and
// with exactly two proxies a last column with the second's median over
// the first's.
func Table(runs []Run) string {
	var b strings.Builder
	b.WriteString("| measurement |")
	for _, r := range runs {
		fmt.Fprintf(&b, " %s #%d |", r.Proxy, r.Round+1)
	}
	labels := proxies(runs)
	if len(labels) == 2 {
		fmt.Fprintf(&b, " %s/%s |", labels[1], labels[0])
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(runs)+boolInt(len(labels) == 2)))
	b.WriteString("\n")
	for _, m := range rows(runs) {
		b.WriteString("| " + label(m) + " |")
		for _, r := range runs {
			if v, ok := value(r, m.Name); ok {
				fmt.Fprintf(&b, " %s |", results.Format(v))
			} else {
				b.WriteString(" — |")
			}
		}
		if len(labels) == 2 {
			x, xok := median(runs, labels[0], m.Name)
			y, yok := median(runs, labels[1], m.Name)
			b.WriteString(" " + ratio(x, xok, y, yok) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ScalingTable compares a proxy's medians at two scales (small, then
// large): one row per measurement, the ratio large/small last.
func ScalingTable(small, large []Run, proxy string) string {
	if len(small) == 0 || len(large) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | %d services | %d services | ratio |\n|---|---|---|---|\n", proxy, small[0].Services, large[0].Services)
	for _, m := range rows(large) {
		x, xok := median(small, proxy, m.Name)
		y, yok := median(large, proxy, m.Name)
		if !xok || !yok {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", label(m), results.Format(x), results.Format(y), ratio(x, xok, y, yok))
	}
	return b.String()
}

// label is the measurement's name with its unit.
func label(m results.Measurement) string {
	if m.Unit == "" {
		return m.Name
	}
	return m.Name + " (" + m.Unit + ")"
}

// value is the run's measurement of that name; ok is false when it has
// none.
func value(r Run, name string) (float64, bool) {
	for _, m := range r.Measurements {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// rows is every measurement name, in first-reported order.
func rows(runs []Run) []results.Measurement {
	seen := map[string]bool{}
	var out []results.Measurement
	for _, r := range runs {
		for _, m := range r.Measurements {
			if !seen[m.Name] {
				seen[m.Name] = true
				out = append(out, m)
			}
		}
	}
	return out
}

func proxies(runs []Run) []string {
	var out []string
	for _, r := range runs {
		if !slices.Contains(out, r.Proxy) {
			out = append(out, r.Proxy)
		}
	}
	return out
}

// median is the median of a measurement over one proxy's rounds; ok is
// false when no round has it.
func median(runs []Run, proxy, name string) (float64, bool) {
	var vs []float64
	for _, r := range runs {
		if v, ok := value(r, name); ok && r.Proxy == proxy {
			vs = append(vs, v)
		}
	}
	return results.Median(vs), len(vs) > 0
}

// ratio is y/x, or a dash when either is missing or x is 0.
func ratio(x float64, xok bool, y float64, yok bool) string {
	if !xok || !yok || x == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", y/x)
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of vs;
// 0 for none.
func Percentile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Bucket is one cumulative histogram bucket: the count of observations
// at most LE.
type Bucket struct {
	LE    float64 // math.Inf(1) for the last
	Count float64
}

// HistogramQuantile is the q-quantile (0 < q ≤ 1) of a cumulative
// histogram, interpolated linearly within its bucket as Prometheus'
// histogram_quantile does; an observation in the +Inf bucket reads as the
// highest finite bound. 0 without observations.
func HistogramQuantile(q float64, buckets []Bucket) float64 {
	b := slices.Clone(buckets)
	slices.SortFunc(b, func(x, y Bucket) int { return cmp.Compare(x.LE, y.LE) })
	if len(b) == 0 || b[len(b)-1].Count == 0 {
		return 0
	}
	rank := q * b[len(b)-1].Count
	lower, below := 0.0, 0.0
	for i, x := range b {
		if x.Count >= rank {
			if math.IsInf(x.LE, 1) {
				if i == 0 {
					return 0
				}
				return b[i-1].LE
			}
			if x.Count == below {
				return x.LE
			}
			return lower + (x.LE-lower)*(rank-below)/(x.Count-below)
		}
		lower, below = x.LE, x.Count
	}
	return b[len(b)-1].LE
}
