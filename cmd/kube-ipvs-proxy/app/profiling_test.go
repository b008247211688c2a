package app

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// TestProfiling: --profiling and enableProfiling serve Go's profiles on
// the metrics server, as kube-proxy; without them /debug/pprof/ is absent.
func TestProfiling(t *testing.T) {
	dir := t.TempDir()
	on := writeFile(t, dir, "on.yaml", typeMeta+"enableProfiling: true\n")
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{"off by default", nil, false},
		{"--profiling", []string{"--profiling"}, true},
		{"--profiling=false", []string{"--profiling=false"}, false},
		{"enableProfiling in the file", []string{"--config", on}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := mustParse(t, append(tc.args, "--hostname-override", "n")...)
			rc := o.RunConfig()
			if rc.EnableProfiling != tc.want {
				t.Fatalf("EnableProfiling = %v, want %v", rc.EnableProfiling, tc.want)
			}
			h := metricsHandler(prometheus.NewRegistry(), rc.EnableProfiling)
			for path, code := range map[string]int{"/debug/pprof/heap": http.StatusOK, "/debug/pprof/": http.StatusOK, "/metrics": http.StatusOK} {
				if !tc.want && path != "/metrics" {
					code = http.StatusNotFound
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != code {
					t.Errorf("GET %s: %d, want %d", path, rec.Code, code)
				}
			}
		})
	}
}

// TestDebugFlagsV: with profiling, PUT /debug/flags/v sets the log
// verbosity, answering as kube-proxy's routes.DebugFlags handler; other
// methods and bad values are refused, and without profiling the route is
// absent.
func TestDebugFlagsV(t *testing.T) {
	defer func(v string) { _, _ = setVerbosity(v) }(verbosityString())
	tests := []struct {
		name      string
		profiling bool
		method    string
		path      string
		body      string
		wantCode  int
		wantBody  string
		wantV     string // "": unchanged
	}{
		{"PUT sets the verbosity", true, http.MethodPut, "/debug/flags/v", "5", http.StatusOK, "successfully set klog.logging.verbosity to 5\n", "5"},
		{"PUT of another value sets it", true, http.MethodPut, "/debug/flags/v", "0", http.StatusOK, "successfully set klog.logging.verbosity to 0\n", "0"},
		{"a value that is not a number is refused", true, http.MethodPut, "/debug/flags/v", "loud", http.StatusBadRequest, `strconv.ParseUint: parsing "loud": invalid syntax` + "\n", ""},
		{"GET is refused", true, http.MethodGet, "/debug/flags/v", "", http.StatusNotAcceptable, "unsupported http method\n", ""},
		{"the index lists v", true, http.MethodGet, "/debug/flags/", "", http.StatusOK, "<tr>v<br>", ""},
		{"without profiling there is no route", false, http.MethodPut, "/debug/flags/v", "5", http.StatusNotFound, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _ = setVerbosity("2")
			h := metricsHandler(prometheus.NewRegistry(), tc.profiling)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
			want := tc.wantV
			if want == "" {
				want = "2"
			}
			if got := verbosityString(); got != want {
				t.Errorf("verbosity after the request: %s, want %s", got, want)
			}
		})
	}
}

// verbosityString is klog's -v now.
func verbosityString() string {
	for v := 10; v > 0; v-- {
		if klog.V(klog.Level(v)).Enabled() {
			return strconv.Itoa(v)
		}
	}
	return "0"
}

// TestDebugFlagsVReachesTheJSONLogger: with --logging-format=json the
// verbosity set through /debug/flags/v is the JSON logger's too.
func TestDebugFlagsVReachesTheJSONLogger(t *testing.T) {
	o, _ := mustParse(t, "--hostname-override", "n", "--logging-format", "json")
	var buf strings.Builder
	setupLogging(o, &buf)
	defer func(v string) {
		klog.ClearLogger()
		verbositySetters = nil
		_, _ = setVerbosity(v)
	}(verbosityString())
	if klog.Background().V(4).Enabled() {
		t.Fatal("the JSON logger logs at -v=4 before the change")
	}
	rec := httptest.NewRecorder()
	metricsHandler(prometheus.NewRegistry(), true).ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/debug/flags/v", strings.NewReader("4")))
	if rec.Code != http.StatusOK {
		t.Fatalf("PUT /debug/flags/v: %d %s", rec.Code, rec.Body.String())
	}
	if !klog.Background().V(4).Enabled() {
		t.Error("the JSON logger does not log at -v=4 after PUT /debug/flags/v 4")
	}
}
