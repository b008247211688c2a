package health

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/httpserve"
)

// ToBeDeletedTaint is the taint the Cluster Autoscaler puts on a node it is
// about to delete; while it is present /healthz answers 503 so that load
// balancers drain the node first (kube-proxy's ToBeDeletedTaint).
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// DefaultBindAddress is kube-proxy's default --healthz-bind-address.
const DefaultBindAddress = "0.0.0.0:10256"

// Status is the JSON body of /healthz and /livez, field for field
// kube-proxy's ProxyHealth: NodeEligible is set on /healthz only, and
// Status has one entry per IP family given to NewProxyHealth once a sync
// has been applied.
type Status struct {
	// LastUpdated is the time of the last applied sync; a healthy answer
	// reports the current time instead, as kube-proxy does for
	// compatibility with its older releases.
	LastUpdated  time.Time                        `json:"lastUpdated"`
	CurrentTime  time.Time                        `json:"currentTime"`
	NodeEligible *bool                            `json:"nodeEligible,omitempty"`
	Healthy      bool                             `json:"healthy"`
	Status       map[corev1.IPFamily]FamilyStatus `json:"status,omitempty"`
}

// FamilyStatus is the health of one IP family (kube-proxy's ProxierHealth).
// One sync programs every family here, so all entries agree.
type FamilyStatus struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// ProbeObserver counts answered probes by HTTP status code, as kube-proxy's
// kubeproxy_proxy_healthz_total and kubeproxy_proxy_livez_total do.
// *metrics.Metrics implements it.
type ProbeObserver interface {
	HealthzProbe(code int)
	LivezProbe(code int)
}

// ProxyHealth is the proxy's own health: the /healthz and /livez server of
// --healthz-bind-address. It implements the sync loop's Health seam
// (QueuedUpdate, Updated, SyncNode). It is safe for concurrent use.
type ProxyHealth struct {
	timeout  time.Duration
	now      func() time.Time
	families []corev1.IPFamily

	mu           sync.RWMutex
	lastUpdated  time.Time // zero until the first Updated
	oldestQueued time.Time // zero when nothing is pending
	nodeEligible bool
	probes       ProbeObserver
}

// NewProxyHealth returns a healthy ProxyHealth whose updates are late after
// 2 × syncPeriod (kube-proxy's healthTimeout). The first sync counts as
// pending from now: without an Updated within the timeout it turns
// unhealthy. clock nil means time.Now.
// families, if given, are the IP families the proxy serves; each gets an
// entry in the body's "status" map, as kube-proxy reports one per proxier.
func NewProxyHealth(syncPeriod time.Duration, clock func() time.Time, families ...corev1.IPFamily) *ProxyHealth {
	if clock == nil {
		clock = time.Now
	}
	return &ProxyHealth{
		timeout:  2 * syncPeriod,
		now:      clock,
		families: slices.Clone(families),
		// The first sync is pending from the start: a proxy that never
		// syncs turns unhealthy after the timeout.
		oldestQueued: clock(),
		// Eligible while starting up, until a Node says otherwise, as
		// kube-proxy before it waited for the Node at startup.
		nodeEligible: true,
	}
}

// SetProbeObserver makes every /healthz and /livez answer count on o; nil
// stops counting.
func (h *ProxyHealth) SetProbeObserver(o ProbeObserver) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probes = o
}

// QueuedUpdate records that a change is pending. Only the oldest pending
// change counts: repeated calls do not move the deadline.
func (h *ProxyHealth) QueuedUpdate() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldestQueued.IsZero() {
		h.oldestQueued = h.now()
	}
}

// Updated records that a sync was applied: nothing is pending any more.
func (h *ProxyHealth) Updated() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.oldestQueued = time.Time{}
	h.lastUpdated = h.now()
}

// SyncNode records whether this node is eligible for load-balanced traffic:
// not when it has a deletion timestamp or the ToBeDeletedByClusterAutoscaler
// taint. A nil node (not found, or deleted) is not eligible, as kube-proxy
// without a Node. Only /healthz depends on it.
func (h *ProxyHealth) SyncNode(node *corev1.Node) {
	eligible := nodeEligible(node)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodeEligible = eligible
}

func nodeEligible(node *corev1.Node) bool {
	if node == nil || !node.DeletionTimestamp.IsZero() {
		return false
	}
	for _, t := range node.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// NodeEligible reports what the last SyncNode decided (true before any).
func (h *ProxyHealth) NodeEligible() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.nodeEligible
}

// IsHealthy reports the proxy's health ignoring the node's state: false
// only when an update has been pending for 2 × the sync period or longer
// since a sync was last applied, or, before the first Updated, since the
// ProxyHealth was created (the process start).
func (h *ProxyHealth) IsHealthy() bool { return h.Health().Healthy }

// Health returns the body /livez would send, before the healthy answer's
// lastUpdated rewrite.
func (h *ProxyHealth) Health() Status {
	h.mu.RLock()
	defer h.mu.RUnlock()
	now := h.now()
	healthy := h.oldestQueued.IsZero() || now.Sub(h.oldestQueued) < h.timeout
	st := Status{LastUpdated: h.lastUpdated, CurrentTime: now, Healthy: healthy}
	if !h.lastUpdated.IsZero() && len(h.families) > 0 {
		st.Status = make(map[corev1.IPFamily]FamilyStatus, len(h.families))
		for _, f := range h.families {
			st.Status[f] = FamilyStatus{LastUpdated: h.lastUpdated, Healthy: healthy}
		}
	}
	return st
}

// Handler serves /healthz and /livez.
func (h *ProxyHealth) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", h.serveHealthz)
	mux.HandleFunc("/livez", h.serveLivez)
	return mux
}

func (h *ProxyHealth) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	st := h.Health()
	eligible := h.NodeEligible()
	st.NodeEligible = &eligible
	code := h.write(w, st, st.Healthy && eligible)
	if o := h.observer(); o != nil {
		o.HealthzProbe(code)
	}
}

func (h *ProxyHealth) serveLivez(w http.ResponseWriter, _ *http.Request) {
	st := h.Health()
	code := h.write(w, st, st.Healthy)
	if o := h.observer(); o != nil {
		o.LivezProbe(code)
	}
}

func (h *ProxyHealth) observer() ProbeObserver {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.probes
}

// write sends st with 200 when healthy, 503 otherwise, and returns the code.
func (h *ProxyHealth) write(w http.ResponseWriter, st Status, healthy bool) int {
	code := http.StatusServiceUnavailable
	if healthy {
		code = http.StatusOK
		// kube-proxy reports a recent lastUpdated whenever it is healthy,
		// as its older releases did after every (even idle) sync.
		st.LastUpdated = st.CurrentTime
	}
	body, err := json.Marshal(st)
	if err != nil { // a Status always marshals; keep the status code anyway
		body = []byte("{}")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
	return code
}

// Serve listens on addr (host:port, kube-proxy's --healthz-bind-address)
// and serves Handler until ctx is done, then shuts the server down. It
// returns the listen error, a serving error, or nil after ctx is done.
func (h *ProxyHealth) Serve(ctx context.Context, addr string) error {
	return httpserve.Serve(ctx, "health checks", addr, h.Handler())
}
