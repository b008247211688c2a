package app

import (
	"context"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/httpserve"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// metricsHandler is the --metrics-bind-address server's routes: metrics.Mux,
// and with profiling Go's profiles under /debug/pprof/, as kube-proxy's
// --profiling (enableProfiling) installs them on its metrics server.
func metricsHandler(g prometheus.Gatherer, profiling bool) *http.ServeMux {
	mux := metrics.Mux(g)
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// serveMetrics serves metricsHandler, /configz (cfg) and /metrics/slis on
// addr until ctx is done.
func serveMetrics(ctx context.Context, addr string, g prometheus.Gatherer, profiling bool, cfg *KubeProxyConfiguration) error {
	mux := metricsHandler(g, profiling)
	if err := installComponentRoutes(mux, cfg); err != nil {
		return err
	}
	return httpserve.Serve(ctx, "metrics", addr, mux)
}
