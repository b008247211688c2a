//go:build integration

package sysctls

import (
	"errors"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// countingHost is sysctl.Host that counts its writes.
type countingHost struct {
	sysctl.Host
	writes []string
}

func (h *countingHost) Write(path, value string) error {
	h.writes = append(h.writes, path+"="+value)
	return h.Host.Write(path, value)
}

// TestKubeProxyConntrackDefaultsReachTheKernel: with kube-proxy's
// defaults, the kernel ends with nf_conntrack_max scaled by the CPUs
// (at least 131072), a hash table of at least a quarter of it, and the
// 24 h / 1 h TCP timeouts that upstream's e2e suite checks; a second
// Apply writes nothing. Before nf_conntrack is loaded, Apply changes
// nothing and says so; our nftables table loads it.
func TestKubeProxyConntrackDefaultsReachTheKernel(t *testing.T) {
	s := conntrack.Settings{MaxPerCore: 32 * 1024, Min: 128 * 1024,
		TCPEstablishedTimeout: 24 * time.Hour, TCPCloseWaitTimeout: time.Hour}
	h := &countingHost{}
	logger := klog.Background()
	if _, err := h.Read("/proc/sys/net/netfilter/nf_conntrack_max"); err != nil {
		if err := conntrack.Apply(logger, h, s); !errors.Is(err, conntrack.ErrNotLoaded) || len(h.writes) > 0 {
			t.Fatalf("before nf_conntrack: Apply = %v, writes %v; want ErrNotLoaded and none", err, h.writes)
		}
		t.Log("nf_conntrack was not loaded: Apply said so and wrote nothing")
	}
	w, err := nft.NewLinux(nft.Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Resync(policy.Plan{}); err != nil {
		t.Fatalf("nft table (loads nf_conntrack): %v", err)
	}
	t.Cleanup(func() { _ = w.Cleanup() })

	if err := conntrack.Apply(logger, h, s); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	max := conntrack.MaxFor(s.MaxPerCore, s.Min, conntrack.CPUs(h))
	want := map[string]int{
		"/proc/sys/net/netfilter/nf_conntrack_max":                     max,
		"/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established": 86400,
		"/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait":  3600,
	}
	for path, v := range want {
		if got := readInt(t, h, path); got != v {
			t.Errorf("%s = %d, want %d", path, got, v)
		}
	}
	if hs := readInt(t, h, "/sys/module/nf_conntrack/parameters/hashsize"); hs < max/4 {
		t.Errorf("hashsize %d, want at least %d", hs, max/4)
	}
	t.Logf("CPUs %d, nf_conntrack_max %d, writes %v", conntrack.CPUs(h), max, h.writes)

	h.writes = nil
	if err := conntrack.Apply(logger, h, s); err != nil || len(h.writes) > 0 {
		t.Errorf("second Apply = %v, writes %v; want nothing written", err, h.writes)
	}
}

func readInt(t *testing.T, h *countingHost, path string) int {
	t.Helper()
	s, err := h.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}
