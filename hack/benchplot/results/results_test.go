package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// report renders a minimal result file: for each scale, one kube-proxy
// and one ours run in round 0 with the table-complete time given.
func report(scales ...[3]float64) string {
	var ss []string
	for _, s := range scales {
		ss = append(ss, fmt.Sprintf(`{"services": %[1]d, "loadAfter": "1 1 1", "runs": [
			{"proxy": "kube-proxy", "round": 0, "services": %[1]d, "endpoints": 0, "measurements": [{"name": %[2]q, "value": %[3]v, "unit": "s"}]},
			{"proxy": "ours", "round": 0, "services": %[1]d, "endpoints": 0, "measurements": [{"name": %[2]q, "value": %[4]v, "unit": "s"}]}]}`,
			int(s[0]), TableComplete, s[1], s[2]))
	}
	return `{"header": ["h"], "scales": [` + strings.Join(ss, ",") + `]}`
}

func TestNewestFilePerScaleWins(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  map[int]string // services → the file it came from and ours' value
	}{
		{
			name: "a newer file replaces an older one's scale, and only that scale",
			files: map[string]string{
				"20261127-204418.json": report([3]float64{1000, 13, 4.4}, [3]float64{5000, 130, 16.7}),
				"20261127-212405.json": report([3]float64{5000, 72, 22.2}),
			},
			want: map[int]string{1000: "20261127-204418.json 4.4", 5000: "20261127-212405.json 22.2"},
		},
		{
			name: "newest by the time in the name, not by listing order",
			files: map[string]string{
				"20261201-000000.json": report([3]float64{1000, 10, 3}),
				"20261130-235959.json": report([3]float64{1000, 20, 6}),
			},
			want: map[int]string{1000: "20261201-000000.json 3"},
		},
		{
			name: "a scale only an old file holds stays",
			files: map[string]string{
				"20261101-000000.json": report([3]float64{10000, 400, 60}),
				"20261201-000000.json": report([3]float64{1000, 10, 3}),
			},
			want: map[int]string{1000: "20261201-000000.json 3", 10000: "20261101-000000.json 60"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{"README.md": {Data: []byte("not a result")}}
			for name, data := range tc.files {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			files, err := Load(fsys)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int]string{}
			var order []int
			for _, s := range Newest(files) {
				got[s.Services] = fmt.Sprintf("%s %v", s.From.Name, s.Stat(Ours, TableComplete).Median)
				order = append(order, s.Services)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Newest = %v, want %v", got, tc.want)
			}
			for i := 1; i < len(order); i++ {
				if order[i-1] >= order[i] {
					t.Errorf("scales not in ascending order: %v", order)
				}
			}
		})
	}
}

func TestStatSummarisesOneProxysRoundsOnly(t *testing.T) {
	s := Scale{Services: 1000, Runs: []Run{
		{Proxy: KubeProxy, Round: 0, Measurements: []Measurement{{Name: TableComplete, Value: 15, Unit: "s"}}},
		{Proxy: Ours, Round: 0, Measurements: []Measurement{{Name: TableComplete, Value: 4, Unit: "s"}, {Name: ColdOverBatched, Value: 5.9}}},
		{Proxy: KubeProxy, Round: 1, Measurements: []Measurement{{Name: TableComplete, Value: 13, Unit: "s"}}},
		{Proxy: Ours, Round: 1, Measurements: []Measurement{{Name: TableComplete, Value: 3, Unit: "s"}}},
		{Proxy: KubeProxy, Round: 2, Measurements: []Measurement{{Name: TableComplete, Value: 20, Unit: "s"}}},
		{Proxy: Ours, Round: 2, Measurements: []Measurement{{Name: TableComplete, Value: 8, Unit: "s"}}},
	}}
	// kube-proxy's first sync: done in round 0, not yet when the wait
	// ended in rounds 1 and 2; ours' done in every round.
	s.Runs[0].Measurements = append(s.Runs[0].Measurements, Measurement{Name: OwnFirstSync, Value: 700, Unit: "s"})
	s.Runs[2].Measurements = append(s.Runs[2].Measurements, Measurement{Name: OwnFirstSyncNotYet, Value: 400, Unit: "s"})
	s.Runs[4].Measurements = append(s.Runs[4].Measurements, Measurement{Name: OwnFirstSyncNotYet, Value: 380, Unit: "s"})
	s.Runs[0].Measurements = append(s.Runs[0].Measurements, Measurement{Name: SettledRSS, Value: 89, Unit: "MiB"})
	for _, i := range []int{1, 3, 5} {
		s.Runs[i].Measurements = append(s.Runs[i].Measurements, Measurement{Name: OwnFirstSync, Value: 20, Unit: "s"})
	}
	for _, tc := range []struct {
		name, proxy, measurement string
		want                     Stat
	}{
		{"kube-proxy's three rounds", KubeProxy, TableComplete, Stat{N: 3, Median: 15, Min: 13, Max: 20, Unit: "s", Runs: 3}},
		{"ours' three rounds", Ours, TableComplete, Stat{N: 3, Median: 4, Min: 3, Max: 8, Unit: "s", Runs: 3}},
		{"a measurement one round has", Ours, ColdOverBatched, Stat{N: 1, Median: 5.9, Min: 5.9, Max: 5.9, Runs: 3}},
		{"ours only: kube-proxy's not applicable, not missing", KubeProxy, ColdOverBatched, Stat{Runs: 3, NotApplicable: true}},
		{"rounds with only a lower bound count at it, and make the median one", KubeProxy, OwnFirstSync,
			Stat{N: 3, Median: 400, Min: 380, Max: 700, Unit: "s", Bounded: 2, Runs: 3}},
		{"no lower bound: an exact median", Ours, OwnFirstSync, Stat{N: 3, Median: 20, Min: 20, Max: 20, Unit: "s", Runs: 3}},
		{"the lower bound is no measurement of its own in the table", KubeProxy, OwnFirstSyncNotYet,
			Stat{N: 2, Median: 390, Min: 380, Max: 400, Unit: "s", Runs: 3}},
		{"taken after the first sync: the rounds that stopped waiting are not yet, not missing", KubeProxy, SettledRSS,
			Stat{N: 1, Median: 89, Min: 89, Max: 89, Unit: "MiB", Runs: 3, NotYet: 2}},
		{"taken before the first sync: missing, not not-yet", KubeProxy, PeakRSS, Stat{Runs: 3}},
		{"a proxy with no runs", "other", TableComplete, Stat{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Stat(tc.proxy, tc.measurement); got != tc.want {
				t.Errorf("Stat(%s, %s) = %+v, want %+v", tc.proxy, tc.measurement, got, tc.want)
			}
		})
	}
	if got := s.Rounds(); got != 3 {
		t.Errorf("Rounds() = %d, want 3", got)
	}
}

func TestLoadRefusesWhatWouldShowAsDashes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    string
		wantErr error
	}{
		{"a .json not named by its time", map[string]string{"vs-kube-proxy-20261127-204418.json": report()}, "", ErrName},
		{"a field the schema does not have", map[string]string{"20261127-204418.json": `{"header": [], "scale": []}`}, `unknown field "scale"`, nil},
		{"a scale twice in one file", map[string]string{"20261127-204418.json": report([3]float64{1000, 1, 1}, [3]float64{1000, 2, 2})}, "1000 services twice", nil},
		{"a scale without runs", map[string]string{"20261127-204418.json": `{"header": [], "scales": [{"services": 1000, "loadAfter": "", "runs": []}]}`}, "without runs", nil},
		{"no result file at all", map[string]string{"README.md": "x"}, "no result files", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, data := range tc.files {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			_, err := Load(fsys)
			switch {
			case err == nil:
				t.Fatal("Load succeeded")
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("Load: %v, want %v", err, tc.wantErr)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("Load: %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestSchemaIsBenchscalesFile: the result files' schema is written once,
// in integration/benchscale/results/schema.go, which integration/benchscale
// writes the files with, and tested there; schema.go and schema_test.go
// here are links to them (doc.go says why not an import), so a copy put
// in either's place, which could drift, fails.
func TestSchemaIsBenchscalesFile(t *testing.T) {
	for _, name := range []string{"schema.go", "schema_test.go"} {
		t.Run(name, func(t *testing.T) {
			want := "../../../integration/benchscale/results/" + name
			got, err := os.Readlink(name)
			if err != nil {
				t.Fatalf("%s is not a link to %s: %v", name, want, err)
			}
			if filepath.ToSlash(got) != want {
				t.Fatalf("%s links to %s, want %s", name, got, want)
			}
			if _, err := os.Stat(got); err != nil {
				t.Fatalf("%s's target: %v", name, err)
			}
		})
	}
}

func TestWaitedIsTheFirstSyncsLowerBoundLessTheTableComplete(t *testing.T) {
	run := func(proxy string, ms ...Measurement) Run { return Run{Proxy: proxy, Measurements: ms} }
	m := func(name string, v float64) Measurement { return Measurement{Name: name, Value: v, Unit: "s"} }
	for _, tc := range []struct {
		name string
		runs []Run
		want Stat
	}{
		{"every round stopped", []Run{
			run(KubeProxy, m(TableComplete, 77.6), m(OwnFirstSyncNotYet, 197.7)),
			run(KubeProxy, m(TableComplete, 73.5), m(OwnFirstSyncNotYet, 194.4)),
			run(Ours, m(TableComplete, 20), m(OwnFirstSync, 20.1)),
		}, Stat{N: 2, Median: 120.5, Min: 120.1, Max: 120.9, Unit: "s", Runs: 2}},
		{"only the rounds that stopped count", []Run{
			run(KubeProxy, m(TableComplete, 16.3), m(OwnFirstSync, 134)),
			run(KubeProxy, m(TableComplete, 15.4), m(OwnFirstSyncNotYet, 135.4)),
		}, Stat{N: 1, Median: 120, Min: 120, Max: 120, Unit: "s", Runs: 2}},
		{"none stopped", []Run{run(KubeProxy, m(TableComplete, 16.3), m(OwnFirstSync, 134))}, Stat{Runs: 1}},
		{"a bound without the table complete says nothing of the wait", []Run{run(KubeProxy, m(OwnFirstSyncNotYet, 300))}, Stat{Runs: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Scale{Runs: tc.runs}.Waited(KubeProxy)
			round := func(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
			got.Median, got.Min, got.Max = round(got.Median), round(got.Min), round(got.Max)
			if got != tc.want {
				t.Errorf("Waited = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestEarlierIsTheNewestOlderFileThatMeasuredItExactly(t *testing.T) {
	files := map[string]string{
		"20261127-204418.json": scaleWith(5000, OwnFirstSync, 1031),
		"20261127-212405.json": scaleWith(5000, OwnFirstSync, 676),
		"20261128-002355.json": scaleWith(5000, OwnFirstSyncNotYet, 268),
		"20261128-010000.json": scaleWith(10000, OwnFirstSync, 900),
		"20261128-020135.json": scaleWith(5000, OwnFirstSyncNotYet, 182),
	}
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	loaded, err := Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var s Selected
	for _, sel := range Newest(loaded) {
		if sel.Services == 5000 {
			s = sel
		}
	}
	if s.From.Name != "20261128-020135.json" || len(s.Older) != 3 || s.Older[0].Name != "20261128-002355.json" {
		t.Fatalf("Newest: 5,000 from %s, older %v; want the newest, and the three older files holding 5,000 newest first", s.From.Name, s.Older)
	}
	for _, tc := range []struct {
		name, proxy, measurement string
		wantFrom                 string // "" for none
		wantMedian               float64
	}{
		{"a lower bound alone is passed over for the newest exact one; another scale's file is no candidate",
			KubeProxy, OwnFirstSync, "20261127-212405.json", 676},
		{"nothing older measured it", KubeProxy, SettledRSS, "", 0},
		{"another proxy's is not it", Ours, OwnFirstSync, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, st, ok := s.Earlier(tc.proxy, tc.measurement)
			if ok != (tc.wantFrom != "") || e.From.Name != tc.wantFrom || st.Median != tc.wantMedian {
				t.Errorf("Earlier = %s, %v, %v; want %q, %v", e.From.Name, st.Median, ok, tc.wantFrom, tc.wantMedian)
			}
		})
	}
}

// scaleWith renders a result file with one kube-proxy run at services
// that has one measurement.
func scaleWith(services int, name string, v float64) string {
	return fmt.Sprintf(`{"header": ["h"], "scales": [{"services": %d, "loadAfter": "1 1 1", "runs": [
		{"proxy": "kube-proxy", "round": 0, "services": %[1]d, "endpoints": 0, "measurements": [{"name": %q, "value": %v, "unit": "s"}]}]}]}`,
		services, name, v)
}

func TestTableWaitedIsTheWaitFromTheStartOfTheRoundsThatStopped(t *testing.T) {
	m := func(name string, v float64) Measurement { return Measurement{Name: name, Value: v, Unit: "s"} }
	s := Scale{Runs: []Run{
		{Proxy: KubeProxy, Measurements: []Measurement{m(TableNotYet, 900.4), m(CPUNotYet, 800)}},
		{Proxy: KubeProxy, Measurements: []Measurement{m(TableComplete, 850)}},
		{Proxy: KubeProxy, Measurements: []Measurement{m(TableNotYet, 901.2)}},
		{Proxy: Ours, Measurements: []Measurement{m(TableComplete, 120)}},
	}}
	if got, want := s.TableWaited(KubeProxy), (Stat{N: 2, Median: 900.8, Min: 900.4, Max: 901.2, Unit: "s", Runs: 3}); got != want {
		t.Errorf("TableWaited(kube-proxy) = %+v, want %+v", got, want)
	}
	if got := s.TableWaited(Ours); got != (Stat{Runs: 1}) {
		t.Errorf("TableWaited(ours) = %+v, want none of 1 run", got)
	}
	// The table's median counts the stopped rounds at their bound.
	if got := s.Stat(KubeProxy, TableComplete); got.N != 3 || got.Bounded != 2 || !got.LowerBound() {
		t.Errorf("Stat(kube-proxy, table complete) = %+v, want 3 rounds, 2 bounded", got)
	}
}
