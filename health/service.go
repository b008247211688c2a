package health

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/httpserve"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// WeightHeader carries a health check answer's local endpoint count, for
// load balancers that weight nodes by it (kube-proxy sets it too).
const WeightHeader = "X-Load-Balancing-Endpoint-Weight"

// ListenFunc opens a listener; net.ListenConfig.Listen is the default.
// Tests inject one to pick ports or to fail on purpose.
type ListenFunc func(ctx context.Context, network, address string) (net.Listener, error)

// ServiceHealth runs the healthCheckNodePort servers: one HTTP server per
// Service (on every configured node address) answering whether this node
// should receive the Service's external traffic. It implements the sync
// loop's ServiceHealth seam and is safe for concurrent use.
type ServiceHealth struct {
	hosts []string // "" means all addresses
	proxy *ProxyHealth

	mu        sync.Mutex
	listen    ListenFunc
	services  map[policy.ServiceKey]*checkServer
	endpoints map[policy.ServiceKey]int // the last SyncEndpoints
	log       klog.Logger
}

// NewServiceHealth returns a ServiceHealth that listens on addrs (the node
// port addresses), or on all addresses when addrs is empty, and reports
// proxy's health (nil counts as healthy). An address listens in its own
// family only, so that 0.0.0.0 and :: may both be given, as kube-proxy's
// per-family servers listen. It opens nothing until
// SyncServices. A server that stops on its own is logged to logger.
func NewServiceHealth(logger klog.Logger, addrs []netip.Addr, proxy *ProxyHealth) *ServiceHealth {
	hosts := []string{""}
	if len(addrs) > 0 {
		hosts = hosts[:0]
		for _, a := range addrs {
			hosts = append(hosts, a.Unmap().String())
		}
		slices.Sort(hosts)
		hosts = slices.Compact(hosts)
	}
	return &ServiceHealth{
		log:       logger,
		hosts:     hosts,
		proxy:     proxy,
		listen:    (&net.ListenConfig{}).Listen,
		services:  map[policy.ServiceKey]*checkServer{},
		endpoints: map[policy.ServiceKey]int{},
	}
}

// SetListenFunc replaces how listeners are opened, for servers opened from
// now on; nil restores the default.
func (s *ServiceHealth) SetListenFunc(fn ListenFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fn == nil {
		fn = (&net.ListenConfig{}).Listen
	}
	s.listen = fn
}

// SyncServices makes ports the set of served health checks: a server whose
// service is gone or whose port changed is closed, a missing one is opened,
// the others are left alone. A port of 0 means no health check. A server
// that cannot listen is reported in the returned error, naming its service,
// and retried on the next call; the other services are still served.
func (s *ServiceHealth) SyncServices(ports map[policy.ServiceKey]uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, key := range slices.SortedFunc(maps.Keys(s.services), policy.ServiceKey.Compare) {
		cs := s.services[key]
		if port := ports[key]; port != cs.port {
			delete(s.services, key)
			if err := cs.close(); err != nil {
				errs = append(errs, fmt.Errorf("close health check for service %s on port %d: %w", key, cs.port, err))
			}
		}
	}
	for _, key := range slices.SortedFunc(maps.Keys(ports), policy.ServiceKey.Compare) {
		port := ports[key]
		if port == 0 || s.services[key] != nil {
			continue
		}
		cs, err := s.open(key, port)
		if err != nil {
			errs = append(errs, fmt.Errorf("open health check for service %s on port %d: %w", key, port, err))
			continue
		}
		s.services[key] = cs
	}
	return errors.Join(errs...)
}

// SyncEndpoints sets the number of local ready endpoints of every service;
// a service missing from localReady has none. It never fails.
func (s *ServiceHealth) SyncEndpoints(localReady map[policy.ServiceKey]int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = maps.Clone(localReady)
	if s.endpoints == nil {
		s.endpoints = map[policy.ServiceKey]int{}
	}
	for key, cs := range s.services {
		cs.endpoints.Store(int64(s.endpoints[key]))
	}
	return nil
}

// Services returns the health checks being served, by service.
func (s *ServiceHealth) Services() map[policy.ServiceKey]uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[policy.ServiceKey]uint16, len(s.services))
	for key, cs := range s.services {
		out[key] = cs.port
	}
	return out
}

// Close stops every server. SyncServices may open them again.
func (s *ServiceHealth) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, key := range slices.SortedFunc(maps.Keys(s.services), policy.ServiceKey.Compare) {
		if err := s.services[key].close(); err != nil {
			errs = append(errs, fmt.Errorf("close health check for service %s: %w", key, err))
		}
	}
	clear(s.services)
	return errors.Join(errs...)
}

// open listens on every host at port and serves key's health check; on any
// failure it closes what it opened.
func (s *ServiceHealth) open(key policy.ServiceKey, port uint16) (*checkServer, error) {
	cs := &checkServer{key: key, port: port, proxy: s.proxy}
	cs.endpoints.Store(int64(s.endpoints[key]))
	for _, host := range s.hosts {
		addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
		l, err := s.listen(context.Background(), listenNetwork(host), addr)
		if err != nil {
			_ = cs.close() // nothing to report beyond the listen error
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		srv := &http.Server{Handler: cs, ReadHeaderTimeout: httpserve.ReadHeaderTimeout}
		cs.servers = append(cs.servers, srv)
		go func() {
			// Serve returns ErrServerClosed after close; anything else
			// means the listener broke and nobody else can hear about it.
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error(err, "Health check server stopped", "service", key.String(), "address", l.Addr().String())
			}
		}()
	}
	return cs, nil
}

// listenNetwork is "tcp4" or "tcp6" for an address of that family, so that
// [::] does not also take 0.0.0.0's port; "tcp" for "" (every address).
func listenNetwork(host string) string {
	a, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return "tcp"
	case a.Is4():
		return "tcp4"
	}
	return "tcp6"
}

// checkServer is one service's health check, on one or more addresses.
type checkServer struct {
	key       policy.ServiceKey
	port      uint16
	proxy     *ProxyHealth
	servers   []*http.Server
	endpoints atomic.Int64
}

func (cs *checkServer) close() error {
	var errs []error
	for _, srv := range cs.servers {
		if err := srv.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ServeHTTP answers 200 when the service has local ready endpoints and the
// proxy is healthy, 503 otherwise, with kube-proxy's headers and body.
func (cs *checkServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	count := int(cs.endpoints.Load())
	healthy := cs.proxy == nil || cs.proxy.IsHealthy()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(WeightHeader, strconv.Itoa(count))
	if count != 0 && healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = fmt.Fprint(w, serviceBody(cs.key, count, healthy))
}

// serviceBody renders kube-proxy's health check body byte for byte: tab
// indented, no trailing newline.
func serviceBody(key policy.ServiceKey, count int, healthy bool) string {
	return fmt.Sprintf("{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		key.Namespace, key.Name, count, healthy)
}
