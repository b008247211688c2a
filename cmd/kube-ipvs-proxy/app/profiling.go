package app

import (
	"context"
	"net/http"
	"net/http/pprof"
	"runtime"

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

// heapSampling keeps the runtime's heap profile sampling only where
// the profile can be read: with --profiling, on /debug/pprof/heap.
// Without it, each sampled allocation's call stack still keeps a bucket
// for the life of the process (about 1.5 MiB at 10,000 services,
// BENCHMARKS.md "Memory"), and nothing reads them.
func heapSampling(profiling bool) {
	if !profiling {
		runtime.MemProfileRate = 0
	}
}
