package app

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// apiErrorLogEvery is how often, at most, a failure to reach the API
// server is logged while it lasts.
const apiErrorLogEvery = 30 * time.Second

// apiErrorLog logs at the default level that the API server cannot be
// reached, with its address and the error: the first failure at once,
// then at most once per apiErrorLogEvery with the number of failures in
// between, and once when a request gets through again. client-go's
// reflectors log these failures only at -v=2 or -v=4 while they back
// off, so without it a wrong --kubeconfig or --master shows nothing until
// /healthz fails.
type apiErrorLog struct {
	logger klog.Logger
	every  time.Duration
	now    func() time.Time

	mu         sync.Mutex
	failing    bool
	last       time.Time // when a failure was last logged
	suppressed int       // failures since then, not logged
}

func newAPIErrorLog(logger klog.Logger) *apiErrorLog {
	return &apiErrorLog{logger: logger, every: apiErrorLogEvery, now: time.Now}
}

// install wraps cfg's transport with the log.
func (l *apiErrorLog) install(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			switch {
			case err == nil:
				l.succeeded(req.URL.Host)
			case req.Context().Err() == nil: // not our own cancellation
				l.failed(req.URL.Host, err)
			}
			return resp, err
		})
	})
}

func (l *apiErrorLog) failed(host string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.failing && now.Sub(l.last) < l.every {
		l.suppressed++
		return
	}
	kv := []any{"address", host}
	if l.failing {
		kv = append(kv, "failuresSinceLastLog", l.suppressed)
	}
	l.logger.Error(err, "Cannot reach the API server; retrying", kv...)
	l.failing, l.last, l.suppressed = true, now, 0
}

func (l *apiErrorLog) succeeded(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.failing {
		return
	}
	l.logger.Info("API server reachable again", "address", host, "failuresSinceLastLog", l.suppressed)
	l.failing, l.suppressed = false, 0
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
