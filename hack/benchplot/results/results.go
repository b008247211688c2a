package results

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// The proxies' labels in a report.
const (
	KubeProxy = "kube-proxy"
	Ours      = "ours"
)

// The measurements the table and the plot name, as the VM half reports
// them (integration/benchscale/vskubeproxy_test.go).
const (
	TableComplete   = "IPVS table complete, from process start"
	CPUUntilTable   = "CPU until the table is complete"
	OwnFirstSync    = "own first sync done, from process start"
	SettledRSS      = "memory after the first sync, settled: RSS"
	PeakRSS         = "memory: peak RSS (VmHWM) by then"
	ChangeP50       = "endpoint change → kernel: p50"
	ColdOverBatched = "cold start / batched floor"

	// OwnFirstSyncNotYet is reported in place of OwnFirstSync by a run
	// that stopped waiting for the first sync
	// (KIP_BENCH_SCALE_FIRST_SYNC_WAIT): the time waited, a lower bound.
	OwnFirstSyncNotYet = "own first sync not done yet, from process start (a lower bound)"
)

// lowerBounds names, for a measurement, the one a run reports instead
// when it has only a lower bound of it.
var lowerBounds = map[string]string{OwnFirstSync: OwnFirstSyncNotYet}

// StampLayout is the UTC time in a result file's name, as
// make bench-vs-kube-proxy stamps it.
const StampLayout = "20060102-150405"

// File is one result file read.
type File struct {
	Name   string    // its base name, <YYYYMMDD-HHMMSS>.json
	When   time.Time // from its name
	Report Report
}

// ErrName is returned for a .json file whose name is not a stamp: its
// time is what "newest" compares, so a file cannot go without one.
var ErrName = errors.New("result file not named <YYYYMMDD-HHMMSS>.json")

// Load reads every .json file at the top of fsys (other files, such as
// the folder's README.md, are left alone), sorted oldest first. A file
// that does not decode, names a scale twice or has no runs is an error:
// it would otherwise show as a row of dashes.
func Load(fsys fs.FS) ([]File, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var files []File
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".json" {
			continue
		}
		f, err := load(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, errors.New("no result files (<YYYYMMDD-HHMMSS>.json)")
	}
	slices.SortFunc(files, func(a, b File) int { return a.When.Compare(b.When) })
	return files, nil
}

func load(fsys fs.FS, name string) (File, error) {
	when, err := time.Parse(StampLayout, strings.TrimSuffix(name, ".json"))
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", name, ErrName)
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", name, err)
	}
	f := File{Name: name, When: when}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a renamed field would otherwise read as zero
	if err := dec.Decode(&f.Report); err != nil {
		return File{}, fmt.Errorf("decode %s: %w", name, err)
	}
	seen := map[int]bool{}
	for _, s := range f.Report.Scales {
		if seen[s.Services] {
			return File{}, fmt.Errorf("%s: %d services twice", name, s.Services)
		}
		seen[s.Services] = true
		if len(s.Runs) == 0 {
			return File{}, fmt.Errorf("%s: %d services without runs", name, s.Services)
		}
	}
	return f, nil
}

// Selected is the scale shown for one number of services and the file it
// came from.
type Selected struct {
	Scale
	From File
}

// Newest picks, for each number of services in files, that scale from
// the newest file that holds it; sorted by services. An older file's
// rounds are not pooled with a newer one's: each file is one VM boot
// with one harness, and a newer run is made because the older one is
// superseded.
func Newest(files []File) []Selected {
	byN := map[int]Selected{}
	for _, f := range files {
		for _, s := range f.Report.Scales {
			if old, ok := byN[s.Services]; !ok || f.When.After(old.From.When) {
				byN[s.Services] = Selected{Scale: s, From: f}
			}
		}
	}
	out := make([]Selected, 0, len(byN))
	for _, s := range byN {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Selected) int { return cmp.Compare(a.Services, b.Services) })
	return out
}

// Stat summarises one measurement of one proxy over a scale's rounds.
type Stat struct {
	N                int // rounds that have it; 0: none, and the rest is zero
	Median, Min, Max float64
	Unit             string
	// LowerBound says some rounds had only a lower bound of it (see
	// lowerBounds), counted at that bound: the true median is at least
	// Median.
	LowerBound bool
}

// Stat is the summary of a measurement over proxy's runs of the scale.
func (s Scale) Stat(proxy, name string) Stat {
	var st Stat
	var vs []float64
	for _, r := range s.Runs {
		if r.Proxy != proxy {
			continue
		}
		for _, m := range r.Measurements {
			bound := m.Name == lowerBounds[name] && lowerBounds[name] != ""
			if m.Name == name || bound {
				vs = append(vs, m.Value)
				st.Unit = m.Unit
				st.LowerBound = st.LowerBound || bound
			}
		}
	}
	if len(vs) == 0 {
		return Stat{}
	}
	st.N = len(vs)
	st.Median = Median(vs)
	st.Min, st.Max = slices.Min(vs), slices.Max(vs)
	return st
}

// Rounds is how many rounds the scale's runs cover.
func (s Scale) Rounds() int {
	var rounds []int
	for _, r := range s.Runs {
		if !slices.Contains(rounds, r.Round) {
			rounds = append(rounds, r.Round)
		}
	}
	return len(rounds)
}

// Thousands writes n with comma separators, as BENCHMARKS.md's prose does.
func Thousands(n int) string {
	if n < 0 {
		return "-" + Thousands(-n)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
