package health

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/httpservetest"
)

const period = 30 * time.Second

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// step is one thing that happens to a ProxyHealth.
type step func(h *ProxyHealth, c *fakeClock)

func queue() step                  { return func(h *ProxyHealth, _ *fakeClock) { h.QueuedUpdate() } }
func update() step                 { return func(h *ProxyHealth, _ *fakeClock) { h.Updated() } }
func wait(d time.Duration) step    { return func(_ *ProxyHealth, c *fakeClock) { c.advance(d) } }
func syncNode(n *corev1.Node) step { return func(h *ProxyHealth, _ *fakeClock) { h.SyncNode(n) } }
func node(taints ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
	}
	return n
}
func deletingNode() *corev1.Node {
	n := node()
	n.DeletionTimestamp = &metav1.Time{Time: t0}
	return n
}

func get(t *testing.T, h http.Handler, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Header(), rec.Body.String()
}

func TestProxyHealthTransitions(t *testing.T) {
	for _, tc := range []struct {
		name           string
		steps          []step
		healthz, livez int
	}{
		{name: "healthy at start", healthz: 200, livez: 200},
		{name: "starting up within 2x sync period is healthy",
			steps: []step{queue(), wait(2*period - time.Nanosecond)}, healthz: 200, livez: 200},
		{name: "no sync within 2x sync period of the start is unhealthy",
			steps: []step{wait(2 * period)}, healthz: 503, livez: 503},
		{name: "no sync since the start, changes queued later: still the start's deadline",
			steps: []step{wait(period), queue(), wait(period)}, healthz: 503, livez: 503},
		{name: "the first sync after a late start makes it healthy",
			steps: []step{wait(10 * period), update()}, healthz: 200, livez: 200},
		{name: "queued update not applied within 2x sync period is unhealthy",
			steps: []step{update(), queue(), wait(2 * period)}, healthz: 503, livez: 503},
		{name: "queued update younger than 2x sync period is healthy",
			steps: []step{update(), queue(), wait(2*period - time.Nanosecond)}, healthz: 200, livez: 200},
		{name: "only the oldest pending update sets the deadline",
			steps: []step{update(), queue(), wait(period), queue(), wait(period)}, healthz: 503, livez: 503},
		{name: "an applied sync makes it healthy again",
			steps: []step{update(), queue(), wait(3 * period), update()}, healthz: 200, livez: 200},
		{name: "idle after a sync stays healthy",
			steps: []step{update(), wait(100 * period)}, healthz: 200, livez: 200},
		{name: "the deadline restarts after an update",
			steps: []step{update(), queue(), wait(period), update(), queue(), wait(period)}, healthz: 200, livez: 200},
		{name: "deleting node fails healthz only",
			steps: []step{update(), syncNode(deletingNode())}, healthz: 503, livez: 200},
		{name: "autoscaler taint fails healthz only",
			steps: []step{update(), syncNode(node("other", ToBeDeletedTaint))}, healthz: 503, livez: 200},
		{name: "other taints do not matter",
			steps: []step{syncNode(node("node.kubernetes.io/unschedulable"))}, healthz: 200, livez: 200},
		{name: "taint removed makes healthz pass again",
			steps: []step{syncNode(node(ToBeDeletedTaint)), syncNode(node())}, healthz: 200, livez: 200},
		{name: "no node fails healthz only",
			steps: []step{syncNode(nil)}, healthz: 503, livez: 200},
		{name: "late update and ineligible node fail both",
			steps: []step{update(), queue(), wait(3 * period), syncNode(deletingNode())}, healthz: 503, livez: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{t: t0}
			h := NewProxyHealth(period, c.now)
			for _, s := range tc.steps {
				s(h, c)
			}
			hh := h.Handler()
			if code, _, body := get(t, hh, "/healthz"); code != tc.healthz {
				t.Errorf("/healthz = %d, want %d; body %s", code, tc.healthz, body)
			}
			if code, _, body := get(t, hh, "/livez"); code != tc.livez {
				t.Errorf("/livez = %d, want %d; body %s", code, tc.livez, body)
			}
			if got, want := h.IsHealthy(), tc.livez == 200; got != want {
				t.Errorf("IsHealthy() = %v, want %v", got, want)
			}
		})
	}
}

func TestProxyHealthBody(t *testing.T) {
	const (
		start = "2025-01-02T03:04:05Z"
		later = "2025-01-02T03:05:35Z" // start + 90s
	)
	for _, tc := range []struct {
		name     string
		families []corev1.IPFamily
		steps    []step
		path     string
		code     int
		body     string
	}{
		{name: "healthz healthy reports now as lastUpdated",
			steps: []step{update(), wait(90 * time.Second)}, path: "/healthz", code: 200,
			body: `{"lastUpdated":"` + later + `","currentTime":"` + later + `","nodeEligible":true,"healthy":true}`},
		{name: "livez has no nodeEligible",
			steps: []step{update(), wait(90 * time.Second)}, path: "/livez", code: 200,
			body: `{"lastUpdated":"` + later + `","currentTime":"` + later + `","healthy":true}`},
		{name: "unhealthy reports the last applied sync",
			steps: []step{update(), queue(), wait(90 * time.Second)}, path: "/healthz", code: 503,
			body: `{"lastUpdated":"` + start + `","currentTime":"` + later + `","nodeEligible":true,"healthy":false}`},
		{name: "ineligible node is healthy but not eligible",
			steps: []step{update(), syncNode(node(ToBeDeletedTaint)), wait(90 * time.Second)}, path: "/healthz", code: 503,
			body: `{"lastUpdated":"` + start + `","currentTime":"` + later + `","nodeEligible":false,"healthy":true}`},
		{name: "no status before the first sync",
			path: "/livez", code: 200, families: []corev1.IPFamily{corev1.IPv4Protocol},
			body: `{"lastUpdated":"` + start + `","currentTime":"` + start + `","healthy":true}`},
		{name: "never synced reports no lastUpdated",
			steps: []step{wait(90 * time.Second)}, path: "/livez", code: 503,
			body: `{"lastUpdated":"0001-01-01T00:00:00Z","currentTime":"` + later + `","healthy":false}`},
		{name: "status per family once synced",
			families: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			steps:    []step{update(), queue(), wait(90 * time.Second)}, path: "/livez", code: 503,
			body: `{"lastUpdated":"` + start + `","currentTime":"` + later + `","healthy":false,"status":{` +
				`"IPv4":{"lastUpdated":"` + start + `","healthy":false},"IPv6":{"lastUpdated":"` + start + `","healthy":false}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{t: t0}
			h := NewProxyHealth(10*time.Second, c.now, tc.families...)
			for _, s := range tc.steps {
				s(h, c)
			}
			code, hdr, body := get(t, h.Handler(), tc.path)
			if code != tc.code || body != tc.body {
				t.Errorf("%s = %d %s\nwant %d %s", tc.path, code, body, tc.code, tc.body)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if v := hdr.Get("X-Content-Type-Options"); v != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q", v)
			}
		})
	}
}

// probeCounter records ProbeObserver calls.
type probeCounter struct{ healthz, livez []int }

func (p *probeCounter) HealthzProbe(code int) { p.healthz = append(p.healthz, code) }
func (p *probeCounter) LivezProbe(code int)   { p.livez = append(p.livez, code) }

func TestProxyHealthCountsProbes(t *testing.T) {
	c := &fakeClock{t: t0}
	h := NewProxyHealth(period, c.now)
	p := &probeCounter{}
	h.SetProbeObserver(p)
	hh := h.Handler()
	get(t, hh, "/healthz")
	h.SyncNode(deletingNode())
	get(t, hh, "/healthz")
	get(t, hh, "/livez")
	if got, want := p.healthz, []int{200, 503}; !slices.Equal(got, want) {
		t.Errorf("healthz probes = %v, want %v", got, want)
	}
	if got, want := p.livez, []int{200}; !slices.Equal(got, want) {
		t.Errorf("livez probes = %v, want %v", got, want)
	}
}

func TestProxyHealthServe(t *testing.T) {
	t.Run("serves /livez until the context is done", func(t *testing.T) {
		h := NewProxyHealth(period, nil)
		got := httpservetest.ServeAndGet(t, h.Serve, "/livez")
		if got.Code != 200 || !strings.Contains(got.Body, `"healthy":true`) {
			t.Errorf("GET /livez = %d %s", got.Code, got.Body)
		}
	})
	t.Run("listen failure is returned", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		err = NewProxyHealth(period, nil).Serve(context.Background(), l.Addr().String())
		var opErr *net.OpError
		if !errors.As(err, &opErr) || !strings.Contains(err.Error(), l.Addr().String()) {
			t.Errorf("Serve on a bound port = %v, want a listen error naming the address", err)
		}
	})
}
