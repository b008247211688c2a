package results

import (
	"fmt"
	"slices"
)

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
