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

// lowerBounds names, for a measurement, the one a run reports instead
// when it has only a lower bound of it.
var lowerBounds = map[string]string{
	OwnFirstSync:  OwnFirstSyncNotYet,
	TableComplete: TableNotYet,
	CPUUntilTable: CPUNotYet,
	PeakRSS:       PeakRSSNotYet,
}

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
	// Older are the older files that hold the same number of services,
	// newest first: never pooled with From, only cited for what From
	// lacks (Earlier).
	Older []File
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
		for _, f := range files {
			if f.Name != s.From.Name && slices.ContainsFunc(f.Report.Scales, func(o Scale) bool { return o.Services == s.Services }) {
				s.Older = append(s.Older, f)
			}
		}
		slices.SortFunc(s.Older, func(a, b File) int { return b.When.Compare(a.When) })
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Selected) int { return cmp.Compare(a.Services, b.Services) })
	return out
}

// Stat summarises one measurement of one proxy over a scale's rounds.
type Stat struct {
	N                int // rounds that have it; 0: none, and Median to Bounded are zero
	Median, Min, Max float64
	Unit             string
	// Bounded is how many of the N rounds had only a lower bound of it
	// (see lowerBounds), counted at that bound.
	Bounded int

	// Runs is how many runs the proxy has at the scale: N < Runs when
	// some lack the measurement.
	Runs int
	// NotYet is how many of those lack it because it is taken only after
	// the proxy's own first sync (AfterFirstSync) or its table
	// (AfterTable), which the run stopped waiting for
	// (OwnFirstSyncNotYet, TableNotYet).
	NotYet int
	// NotApplicable says the measurement is of our cold start alone
	// (OursOnly) and the proxy is not ours: nothing is missing.
	NotApplicable bool
}

// LowerBound says the median is a lower bound: some rounds were counted
// at one, so the true median is at least Median.
func (st Stat) LowerBound() bool { return st.Bounded > 0 }

// Stat is the summary of a measurement over proxy's runs of the scale.
func (s Scale) Stat(proxy, name string) Stat {
	st := Stat{NotApplicable: proxy != Ours && slices.Contains(OursOnly, name)}
	var vs []float64
	for _, r := range s.Runs {
		if r.Proxy != proxy {
			continue
		}
		st.Runs++
		had := false
		for _, m := range r.Measurements {
			bound := m.Name == lowerBounds[name] && lowerBounds[name] != ""
			if m.Name == name || bound {
				vs = append(vs, m.Value)
				st.Unit = m.Unit
				if bound {
					st.Bounded++
				}
				had = true
			}
		}
		if !had && (slices.Contains(AfterFirstSync, name) && r.has(OwnFirstSyncNotYet) ||
			slices.Contains(AfterTable, name) && r.has(TableNotYet)) {
			st.NotYet++
		}
	}
	if len(vs) == 0 {
		return Stat{Runs: st.Runs, NotYet: st.NotYet, NotApplicable: st.NotApplicable}
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
