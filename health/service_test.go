package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"k8s.io/klog/v2"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/httpservetest"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

var (
	web = policy.ServiceKey{Namespace: "default", Name: "web"}
	dns = policy.ServiceKey{Namespace: "kube-system", Name: "dns"}
	api = policy.ServiceKey{Namespace: "prod", Name: "api"}
)

// loopbackListener stands in for the node: every requested address is
// served on a fresh 127.0.0.1 port, and requests for ports in refuse fail
// with EADDRINUSE as the kernel would.
type loopbackListener struct {
	mu     sync.Mutex
	refuse map[string]bool         // requested address → fail
	actual map[string]string       // requested address → where it listens
	calls  []string                // requested addresses, in order
	open   map[string]net.Listener // requested address → listener
}

func newLoopback(refuse ...string) *loopbackListener {
	f := &loopbackListener{refuse: map[string]bool{}, actual: map[string]string{}, open: map[string]net.Listener{}}
	for _, a := range refuse {
		f.refuse[a] = true
	}
	return f
}

func (f *loopbackListener) listen(ctx context.Context, network, address string) (net.Listener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, address)
	if f.refuse[address] {
		return nil, &net.OpError{Op: "listen", Net: network, Err: syscall.EADDRINUSE}
	}
	// The requested family is the server's business; the stand-in is
	// always an IPv4 loopback port.
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.actual[address] = l.Addr().String()
	f.open[address] = l
	return l, nil
}

func (f *loopbackListener) where(address string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.actual[address]
}

type answer struct {
	code   int
	weight string
	body   string
}

func probe(t *testing.T, addr string) (answer, error) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return answer{code: resp.StatusCode, weight: resp.Header.Get(WeightHeader), body: string(body)}, nil
}

func mustProbe(t *testing.T, addr string) answer {
	t.Helper()
	a, err := probe(t, addr)
	if err != nil {
		t.Fatalf("GET %s: %v", addr, err)
	}
	return a
}

func TestServiceHealthAnswers(t *testing.T) {
	late := []step{update(), queue(), wait(2 * period)}
	for _, tc := range []struct {
		name      string
		endpoints map[policy.ServiceKey]int
		proxy     []step
		want      answer
	}{
		{name: "local endpoints and healthy proxy pass",
			endpoints: map[policy.ServiceKey]int{web: 2},
			want: answer{200, "2", "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"web\"\n\t},\n" +
				"\t\"localEndpoints\": 2,\n\t\"serviceProxyHealthy\": true\n}"}},
		{name: "no local endpoints fail",
			endpoints: map[policy.ServiceKey]int{web: 0, dns: 3},
			want: answer{503, "0", "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"web\"\n\t},\n" +
				"\t\"localEndpoints\": 0,\n\t\"serviceProxyHealthy\": true\n}"}},
		{name: "service missing from endpoints has none",
			endpoints: map[policy.ServiceKey]int{dns: 3},
			want: answer{503, "0", "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"web\"\n\t},\n" +
				"\t\"localEndpoints\": 0,\n\t\"serviceProxyHealthy\": true\n}"}},
		{name: "unhealthy proxy fails despite local endpoints",
			endpoints: map[policy.ServiceKey]int{web: 1}, proxy: late,
			want: answer{503, "1", "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"web\"\n\t},\n" +
				"\t\"localEndpoints\": 1,\n\t\"serviceProxyHealthy\": false\n}"}},
		{name: "ineligible node does not fail service checks",
			endpoints: map[policy.ServiceKey]int{web: 1}, proxy: []step{syncNode(deletingNode())},
			want: answer{200, "1", "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"web\"\n\t},\n" +
				"\t\"localEndpoints\": 1,\n\t\"serviceProxyHealthy\": true\n}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{t: t0}
			ph := NewProxyHealth(period, c.now)
			for _, s := range tc.proxy {
				s(ph, c)
			}
			f := newLoopback()
			sh := NewServiceHealth(klog.Background(), nil, ph)
			sh.SetListenFunc(f.listen)
			defer sh.Close()
			if err := sh.SyncServices(map[policy.ServiceKey]uint16{web: 30000, dns: 30001}); err != nil {
				t.Fatal(err)
			}
			if err := sh.SyncEndpoints(tc.endpoints); err != nil {
				t.Fatal(err)
			}
			if got := mustProbe(t, f.where(":30000")); got != tc.want {
				t.Errorf("got %d weight %q\n%s\nwant %d weight %q\n%s", got.code, got.weight, got.body, tc.want.code, tc.want.weight, tc.want.body)
			}
		})
	}
}

func TestServiceHealthFollowsChanges(t *testing.T) {
	f := newLoopback()
	sh := NewServiceHealth(klog.Background(), nil, nil)
	sh.SetListenFunc(f.listen)
	defer sh.Close()

	// Endpoints known before the server opens are reported at once.
	if err := sh.SyncEndpoints(map[policy.ServiceKey]int{web: 1, dns: 1}); err != nil {
		t.Fatal(err)
	}
	if err := sh.SyncServices(map[policy.ServiceKey]uint16{web: 30000, dns: 30001}); err != nil {
		t.Fatal(err)
	}
	oldWeb, oldDNS := f.where(":30000"), f.where(":30001")
	if got := mustProbe(t, oldWeb); got.code != 200 {
		t.Fatalf("web before the change = %d", got.code)
	}

	t.Run("endpoint changes reach a running server", func(t *testing.T) {
		if err := sh.SyncEndpoints(map[policy.ServiceKey]int{web: 0, dns: 1}); err != nil {
			t.Fatal(err)
		}
		if got := mustProbe(t, oldWeb); got.code != 503 || got.weight != "0" {
			t.Errorf("web with no endpoints = %d weight %q", got.code, got.weight)
		}
		_ = sh.SyncEndpoints(map[policy.ServiceKey]int{web: 1, dns: 1})
	})
	t.Run("port change closes the old server and opens the new one", func(t *testing.T) {
		calls := len(f.calls)
		if err := sh.SyncServices(map[policy.ServiceKey]uint16{web: 30002, dns: 30001}); err != nil {
			t.Fatal(err)
		}
		if _, err := probe(t, oldWeb); err == nil {
			t.Errorf("old web server %s still answers", oldWeb)
		}
		if got := mustProbe(t, f.where(":30002")); got.code != 200 {
			t.Errorf("new web server = %d", got.code)
		}
		if got := f.calls[calls:]; len(got) != 1 || got[0] != ":30002" {
			t.Errorf("listen calls = %v, want only the new port (unchanged dns left alone)", got)
		}
		if got := mustProbe(t, oldDNS); got.code != 200 {
			t.Errorf("unchanged dns server = %d", got.code)
		}
	})
	t.Run("removed service is closed", func(t *testing.T) {
		if err := sh.SyncServices(map[policy.ServiceKey]uint16{web: 30002}); err != nil {
			t.Fatal(err)
		}
		if _, err := probe(t, oldDNS); err == nil {
			t.Errorf("removed dns server %s still answers", oldDNS)
		}
		if got, want := sh.Services(), map[policy.ServiceKey]uint16{web: 30002}; !maps.Equal(got, want) {
			t.Errorf("Services() = %v, want %v", got, want)
		}
	})
	t.Run("port 0 means no health check", func(t *testing.T) {
		if err := sh.SyncServices(map[policy.ServiceKey]uint16{web: 0}); err != nil {
			t.Fatal(err)
		}
		if got := sh.Services(); len(got) != 0 {
			t.Errorf("Services() = %v, want none", got)
		}
	})
	t.Run("close stops everything", func(t *testing.T) {
		if err := sh.SyncServices(map[policy.ServiceKey]uint16{web: 30003, dns: 30004}); err != nil {
			t.Fatal(err)
		}
		if err := sh.Close(); err != nil {
			t.Fatal(err)
		}
		for _, a := range []string{":30003", ":30004"} {
			if _, err := probe(t, f.where(a)); err == nil {
				t.Errorf("%s still answers after Close", a)
			}
		}
	})
}

func TestServiceHealthBindFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		addrs   []netip.Addr
		refuse  []string
		ports   map[policy.ServiceKey]uint16
		wantErr []string // substrings
		served  map[policy.ServiceKey]uint16
		closed  []string // requested addresses that must not answer
	}{
		{name: "one busy port fails only its service",
			refuse:  []string{":30001"},
			ports:   map[policy.ServiceKey]uint16{web: 30000, dns: 30001, api: 30002},
			wantErr: []string{"kube-system/dns", "port 30001", "address already in use"},
			served:  map[policy.ServiceKey]uint16{web: 30000, api: 30002}},
		{name: "each failing service is named",
			refuse:  []string{":30000", ":30002"},
			ports:   map[policy.ServiceKey]uint16{web: 30000, dns: 30001, api: 30002},
			wantErr: []string{"default/web", "prod/api"},
			served:  map[policy.ServiceKey]uint16{dns: 30001}},
		{name: "failure on one node address closes the others of that service",
			addrs:   []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")},
			refuse:  []string{"[fd00::1]:30000"},
			ports:   map[policy.ServiceKey]uint16{web: 30000, dns: 30001},
			wantErr: []string{"default/web", "[fd00::1]:30000"},
			served:  map[policy.ServiceKey]uint16{dns: 30001},
			closed:  []string{"10.0.0.1:30000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLoopback(tc.refuse...)
			sh := NewServiceHealth(klog.Background(), tc.addrs, nil)
			sh.SetListenFunc(f.listen)
			defer sh.Close()
			err := sh.SyncServices(tc.ports)
			if err == nil {
				t.Fatal("SyncServices succeeded, want an error")
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("error %v does not wrap EADDRINUSE", err)
			}
			if got := sh.Services(); !maps.Equal(got, tc.served) {
				t.Errorf("Services() = %v, want %v", got, tc.served)
			}
			for key, port := range tc.served {
				host := ""
				if len(tc.addrs) > 0 {
					host = tc.addrs[0].String()
				}
				if _, err := probe(t, f.where(net.JoinHostPort(host, fmt.Sprint(port)))); err != nil {
					t.Errorf("%s not served: %v", key, err)
				}
			}
			for _, a := range tc.closed {
				if _, err := probe(t, f.where(a)); err == nil {
					t.Errorf("%s still answers", a)
				}
			}

			// The failed services are retried on the next sync.
			f.mu.Lock()
			clear(f.refuse)
			f.mu.Unlock()
			if err := sh.SyncServices(tc.ports); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if got := sh.Services(); !maps.Equal(got, tc.ports) {
				t.Errorf("after retry Services() = %v, want %v", got, tc.ports)
			}
		})
	}
}

// TestServiceHealthRealListener uses the default listener on loopback: a
// port another socket holds is reported, and a free one is served.
func TestServiceHealthRealListener(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := uint16(busy.Addr().(*net.TCPAddr).Port)
	_, freePort, _ := net.SplitHostPort(httpservetest.FreeAddr(t))
	var free uint16
	fmt.Sscan(freePort, &free)

	sh := NewServiceHealth(klog.Background(), []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil)
	defer sh.Close()
	err = sh.SyncServices(map[policy.ServiceKey]uint16{web: busyPort, dns: free})
	if err == nil || !strings.Contains(err.Error(), "default/web") || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("SyncServices = %v, want EADDRINUSE naming default/web", err)
	}
	_ = sh.SyncEndpoints(map[policy.ServiceKey]int{dns: 1})
	if got := mustProbe(t, net.JoinHostPort("127.0.0.1", freePort)); got.code != 200 || got.weight != "1" {
		t.Errorf("dns = %d weight %q", got.code, got.weight)
	}
}

// TestServiceHealthListensInEachAddressFamily: given both families'
// unspecified addresses (kube-proxy's two per-family servers), each
// listens in its own family, so that [::] does not take 0.0.0.0's port
// and both answer.
func TestServiceHealthListensInEachAddressFamily(t *testing.T) {
	if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	_, freePort, _ := net.SplitHostPort(httpservetest.FreeAddr(t))
	var port uint16
	fmt.Sscan(freePort, &port)
	sh := NewServiceHealth(klog.Background(), []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}, nil)
	defer sh.Close()
	if err := sh.SyncServices(map[policy.ServiceKey]uint16{web: port}); err != nil {
		t.Fatalf("SyncServices: %v", err)
	}
	_ = sh.SyncEndpoints(map[policy.ServiceKey]int{web: 1})
	for _, host := range []string{"127.0.0.1", "::1"} {
		if got := mustProbe(t, net.JoinHostPort(host, freePort)); got.code != 200 {
			t.Errorf("%s: %d, want 200", host, got.code)
		}
	}
}

// healthSeam and serviceHealthSeam are proxier.Health and
// proxier.ServiceHealth, copied so that this package need not import
// proxier.
type healthSeam interface {
	QueuedUpdate()
	Updated()
	SyncNode(node *corev1.Node)
}

type serviceHealthSeam interface {
	SyncServices(ports map[policy.ServiceKey]uint16) error
	SyncEndpoints(localReady map[policy.ServiceKey]int) error
}

var (
	_ healthSeam        = (*ProxyHealth)(nil)
	_ serviceHealthSeam = (*ServiceHealth)(nil)
)
