package app

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
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
//
// Every other error client-go reports through utilruntime.HandleError
// (the reflectors' "Failed to watch" on a 403, a 500, a decoding error,
// and the rest) goes through the log too: each distinct error (its
// message and text) is logged at most once per apiErrorLogEvery, with the
// number not logged since; one that only wraps the transport failure
// already logged is counted, not logged again.
type apiErrorLog struct {
	logger klog.Logger
	every  time.Duration
	now    func() time.Time

	mu         sync.Mutex
	failing    bool
	lastErr    string    // the transport failure last logged
	last       time.Time // when a failure was last logged
	suppressed int       // failures since then, not logged
	handled    map[string]*handledError
}

// handledError is one distinct error reported through HandleError: when
// it was last logged and how often it came since.
type handledError struct {
	last       time.Time
	suppressed int
}

// maxHandledErrors bounds the distinct errors remembered: the oldest is
// forgotten first.
const maxHandledErrors = 64

func newAPIErrorLog(logger klog.Logger) *apiErrorLog {
	return &apiErrorLog{logger: logger, every: apiErrorLogEvery, now: time.Now, handled: map[string]*handledError{}}
}

// install wraps cfg's transport with the log, and makes it client-go's
// handler of the errors it cannot return (utilruntime.ErrorHandlers, a
// process-wide setting: the proxy has one API client).
func (l *apiErrorLog) install(cfg *rest.Config) {
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{l.handleError}
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
	l.failing, l.lastErr, l.last, l.suppressed = true, err.Error(), now, 0
}

// handleError is a utilruntime.ErrorHandler: it logs err with msg and
// keysAndValues at the default level unless the same error was logged
// less than l.every ago.
func (l *apiErrorLog) handleError(ctx context.Context, err error, msg string, keysAndValues ...any) {
	text := ""
	if err != nil {
		text = err.Error()
	}
	l.mu.Lock()
	now := l.now()
	if l.failing && l.lastErr != "" && strings.Contains(text, l.lastErr) {
		l.suppressed++ // the transport failure's log says it
		l.mu.Unlock()
		return
	}
	key := msg + "\x00" + text
	h := l.handled[key]
	if h != nil && now.Sub(h.last) < l.every {
		h.suppressed++
		l.mu.Unlock()
		return
	}
	kv := keysAndValues
	if h != nil {
		kv = append(append([]any(nil), keysAndValues...), "failuresSinceLastLog", h.suppressed)
	} else {
		l.forgetOldest(now)
		h = &handledError{}
		l.handled[key] = h
	}
	h.last, h.suppressed = now, 0
	l.mu.Unlock()
	logger := klog.LoggerWithName(klog.FromContext(ctx), "UnhandledError")
	logger.Error(err, msg, kv...) //nolint:logcheck // client-go's keys and values
}

// forgetOldest makes room for one more distinct error: those not seen for
// two intervals go, and the oldest if there are still too many.
func (l *apiErrorLog) forgetOldest(now time.Time) {
	var oldest string
	for k, h := range l.handled {
		if now.Sub(h.last) >= 2*l.every {
			delete(l.handled, k)
		} else if oldest == "" || h.last.Before(l.handled[oldest].last) {
			oldest = k
		}
	}
	if len(l.handled) >= maxHandledErrors {
		delete(l.handled, oldest)
	}
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
