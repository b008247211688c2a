package benchscale

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestExpected(t *testing.T) {
	// 20 services: 2 NodePorts (0, 10), 2 with dns (5, 15), the
	// kubernetes Service.
	got := Workload{Services: 20}.Expected()
	want := Expected{VirtualServers: 20 + 2 + 2 + 1, Destinations: (20 + 2 + 2) * PerService, BoundAddresses: 21}
	if got != want {
		t.Errorf("Expected() = %+v, want %+v", got, want)
	}
}

func TestAddressesAreDistinct(t *testing.T) {
	w := Workload{Services: MaxServices}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]string{}
	add := func(a netip.Addr, what string) {
		t.Helper()
		if prev, ok := seen[a]; ok {
			t.Fatalf("%s is both %s and %s", a, prev, what)
		}
		seen[a] = what
	}
	for i := range w.Services {
		add(ClusterIP(i), "a cluster IP")
		for _, e := range w.Slice(i, -1).Endpoints {
			add(netip.MustParseAddr(e.Addresses[0]), "an endpoint")
		}
		for gen := range Generations {
			add(LastEndpoint(i, gen), "a churn endpoint")
		}
	}
	for c := range MaxNewServices {
		add(NewClusterIP(c), "a new cluster IP")
		for _, e := range NewSlice(c).Endpoints {
			add(netip.MustParseAddr(e.Addresses[0]), "a new endpoint")
		}
	}
	nodePorts := 0
	for i := range w.Services {
		if isNodePort(i) {
			nodePorts++
		}
	}
	if free := NodePortLast - NodePortFirst + 1; nodePorts > free {
		t.Errorf("%d services have %d NodePorts; the apiserver's range holds %d", w.Services, nodePorts, free)
	}
	if got := (Workload{Services: 1}).Validate(); got != nil {
		t.Errorf("1 service: %v", got)
	}
	if (Workload{Services: MaxServices + 1}).Validate() == nil {
		t.Errorf("%d services: no error", MaxServices+1)
	}
}

func TestTable(t *testing.T) {
	run := func(proxy string, round int, v float64) Run {
		r := Run{Proxy: proxy, Round: round}
		r.Add("cold start: converged", v, "s")
		return r
	}
	var console strings.Builder
	for _, r := range []Run{run("base", 0, 2), run("tree", 0, 1), run("base", 1, 4), run("tree", 1, 1.5)} {
		console.WriteString("\r\nnoise " + resultLine(r) + "\n")
	}
	runs, err := ParseRuns(console.String())
	if err != nil || len(runs) != 4 {
		t.Fatalf("ParseRuns: %d runs, %v", len(runs), err)
	}
	want := "| measurement | base #1 | tree #1 | base #2 | tree #2 | tree/base |\n" +
		"|---|---|---|---|---|---|\n" +
		"| cold start: converged (s) | 2 | 1 | 4 | 1.5 | 0.42 |\n"
	if got := Table(runs); got != want {
		t.Errorf("Table:\n%s\nwant:\n%s", got, want)
	}
	large := []Run{run("tree", 0, 3)}
	large[0].Services = 10
	large[0].Add("idle: syncs", 2, "")
	want = "| tree | 0 services | 10 services | ratio |\n|---|---|---|---|\n" +
		"| cold start: converged (s) | 1.25 | 3 | 2.40 |\n"
	if got := ScalingTable(runs, large, "tree"); got != want {
		t.Errorf("ScalingTable:\n%s\nwant:\n%s", got, want)
	}
}

func TestPercentile(t *testing.T) {
	vs := []float64{5, 1, 4, 2, 3}
	for p, want := range map[float64]float64{50: 3, 90: 5, 100: 5, 1: 1} {
		if got := Percentile(vs, p); got != want {
			t.Errorf("Percentile(%v) = %v, want %v", p, got, want)
		}
	}
}

// TestHistogramQuantile: interpolation within the bucket, as Prometheus'
// histogram_quantile; +Inf reads as the highest finite bound.
func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	b := []Bucket{{0.1, 50}, {0.5, 90}, {1, 99}, {inf, 100}}
	for _, tc := range []struct {
		q, want float64
	}{
		{0.5, 0.1}, {0.25, 0.05}, {0.7, 0.3}, {0.99, 1}, {1, 1},
	} {
		if got := HistogramQuantile(tc.q, b); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q=%v: %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := HistogramQuantile(0.5, []Bucket{{1, 0}, {inf, 0}}); got != 0 {
		t.Errorf("no observations: %v, want 0", got)
	}
}

// A line of kube-proxy's configuration goes into the first document:
// kube-proxy reads only that one, and we refuse its fields in our own.
func TestIntoFirstDocumentKeepsOurDocumentLast(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"one document", "mode: ipvs", "mode: ipvs\nx: 1\n"},
		{"one document with a newline", "mode: ipvs\n", "mode: ipvs\nx: 1\n"},
		{"two documents", "mode: ipvs\n---\nkind: K\nmaxVirtualServersPerNode: 0",
			"mode: ipvs\nx: 1\n---\nkind: K\nmaxVirtualServersPerNode: 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			if got := string(intoFirstDocument(in, "x: 1")); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if string(in) != tc.in {
				t.Errorf("the input was changed to %q", in)
			}
		})
	}
}

func TestRoundsAlternateWhichProxyRunsFirst(t *testing.T) {
	proxies := []string{"base", "tree"}
	for _, tc := range []struct {
		round int
		want  []string
	}{
		{0, []string{"base", "tree"}},
		{1, []string{"tree", "base"}},
		{2, []string{"base", "tree"}},
	} {
		if got := RoundOrder(proxies, tc.round); !slices.Equal(got, tc.want) {
			t.Errorf("round %d: %v, want %v", tc.round, got, tc.want)
		}
	}
	if proxies[0] != "base" {
		t.Errorf("RoundOrder changed its argument: %v", proxies)
	}
}
