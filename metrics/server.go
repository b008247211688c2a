package metrics

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/component-base/metrics/prometheus/slis"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/httpserve"
)

// DefaultBindAddress is kube-proxy's default --metrics-bind-address.
const DefaultBindAddress = "127.0.0.1:10249"

// ProxyMode is what /proxyMode answers, as kube-proxy in IPVS mode.
const ProxyMode = "ipvs"

// NewRegistry returns a registry with the Go runtime and process
// collectors (go_*, process_*), which kube-proxy's /metrics also shows.
// Pass it to New and Serve.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves g's metrics in the Prometheus text (or negotiated)
// format; it is the /metrics handler.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// Mux is the --metrics-bind-address server's routes, those of kube-proxy's
// that a drop-in needs: /metrics, /proxyMode (the mode as plain text) and
// /healthz (and /healthz/ping), which answer "ok" while the process serves.
func Mux(g prometheus.Gatherer) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(g))
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) { plain(w, ProxyMode) })
	mux.HandleFunc("/healthz", healthz)
	mux.HandleFunc("/healthz/ping", func(w http.ResponseWriter, _ *http.Request) { plain(w, "ok") })
	return mux
}

// pingCheck is the one check of the metrics server's /healthz: kube-proxy
// installs the API server's healthz handler there with no check of its
// own, which then has its ping check alone.
const pingCheck = "ping"

// healthz answers /healthz as the API server's healthz handler answers
// with its ping check (k8s.io/apiserver's healthz.InstallHandler, which
// kube-proxy uses): "ok", or with ?verbose each check and the verdict;
// ?exclude=ping leaves the check out. Each check run is observed in the
// health-check SLIs (kubernetes_healthcheck and
// kubernetes_healthchecks_total, type "healthz", on /metrics/slis).
func healthz(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	excluded := q["exclude"]
	var out strings.Builder
	if slices.Contains(excluded, pingCheck) {
		fmt.Fprintf(&out, "[+]%s excluded: ok\n", pingCheck)
	} else {
		_ = slis.ObserveHealthcheck(r.Context(), pingCheck, "healthz", slis.Success)
		fmt.Fprintf(&out, "[+]%s ok\n", pingCheck)
	}
	var unknown []string
	for _, name := range excluded {
		if name != pingCheck && !slices.Contains(unknown, strconv.Quote(name)) {
			unknown = append(unknown, strconv.Quote(name))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(unknown, ","))
	}
	if _, verbose := q["verbose"]; !verbose {
		plain(w, "ok")
		return
	}
	plain(w, out.String()+"healthz check passed\n")
}

func plain(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = fmt.Fprint(w, body)
}

// Serve listens on addr (host:port, kube-proxy's --metrics-bind-address)
// and serves Mux(g) until ctx is done, then shuts the server down. It
// returns the listen error, a serving error, or nil after ctx is done.
func Serve(ctx context.Context, addr string, g prometheus.Gatherer) error {
	return httpserve.Serve(ctx, "metrics", addr, Mux(g))
}
