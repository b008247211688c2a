package app

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/httpserve"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// metricsHandler is the --metrics-bind-address server's routes: metrics.Mux,
// and with profiling Go's profiles under /debug/pprof/ and the log
// verbosity at /debug/flags/v, as kube-proxy's --profiling
// (enableProfiling) installs them on its metrics server.
func metricsHandler(g prometheus.Gatherer, profiling bool) *http.ServeMux {
	mux := metrics.Mux(g)
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/flags", debugFlagsIndex)
		mux.HandleFunc("/debug/flags/", debugFlagsIndex)
		mux.HandleFunc("/debug/flags/v", flagPutHandler(setVerbosity))
	}
	return mux
}

// debugFlagsIndex lists the flags /debug/flags/ sets, as the API
// server's routes.DebugFlags page kube-proxy serves.
func debugFlagsIndex(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprintf(w, "<html>\n<head>\n<title>/debug/flags/</title>\n</head>\n<body>\n/debug/flags/<br>\n<br>\nflags:<br>\n<table>\n<tr>%s<br>\n</table>\n<br>\nfull flags configurable<br>\n</body>\n</html>\n", html.EscapeString("v"))
}

// flagPutHandler sets a flag to a PUT request's body, answering as
// routes.StringFlagPutHandler does: 200 and set's message, 400 and its
// error, 406 for another method.
func flagPutHandler(set func(string) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPut {
			writePlainText(w, http.StatusNotAcceptable, "unsupported http method")
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<10))
		if err != nil {
			writePlainText(w, http.StatusBadRequest, "error reading request body: "+err.Error())
			return
		}
		msg, err := set(string(body))
		if err != nil {
			writePlainText(w, http.StatusBadRequest, err.Error())
			return
		}
		writePlainText(w, http.StatusOK, msg)
	}
}

func writePlainText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, text)
}

// verbositySetters change the verbosity of the loggers klog's -v does not
// reach (the JSON logger's, setupLogging).
var (
	verbosityMu      sync.Mutex
	verbositySetters []func(uint32) error
)

// setVerbosity sets the log verbosity (klog's -v, and the JSON logger's)
// to val, a number, as component-base's logs.GlogSetter does for
// kube-proxy.
func setVerbosity(val string) (string, error) {
	v, err := strconv.ParseUint(val, 10, 32)
	if err != nil {
		return "", err
	}
	var level klog.Level
	if err := level.Set(val); err != nil {
		return "", fmt.Errorf("failed set klog.logging.verbosity %s: %w", val, err)
	}
	verbosityMu.Lock()
	defer verbosityMu.Unlock()
	for _, set := range verbositySetters {
		if err := set(uint32(v)); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("successfully set klog.logging.verbosity to %s", val), nil
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
