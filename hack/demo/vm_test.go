//go:build integration

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/vme2e"
)

const (
	nodeName    = "node-a"
	metricsAddr = "127.0.0.1:10249"
	healthzAddr = "127.0.0.1:10256"
	nExchanges  = 40
)

// planFile is the part of the dry-run JSON plan the demo reads.
type planFile struct {
	VirtualServers []struct {
		Service, PortName, Kind, Address, Protocol string
		Port                                       int
		PersistenceTimeoutSeconds                  int
		Destinations                               []struct {
			Address string
			Port    int
			Weight  int
		}
	}
}

// backend is one endpoint address and its ports, as the EndpointSlices
// say.
type backend struct {
	addr  netip.Addr
	ports []discoveryv1.EndpointPort
}

func TestDemoInVM(t *testing.T) {
	proxyKC, adminKC, planPath := os.Getenv(vme2e.EnvProxyKubeconfig), os.Getenv(vme2e.EnvAdminKubeconfig), os.Getenv(envPlan)
	if proxyKC == "" || adminKC == "" || planPath == "" {
		t.Skip("run by the host half: make demo")
	}
	if err := vme2e.BringUpNetwork(); err != nil {
		t.Fatal(err)
	}
	var plan planFile
	data, err := os.ReadFile(planPath)
	if err == nil {
		err = json.Unmarshal(data, &plan)
	}
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKC)
	if err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(cfg)
	byNode := endpointsByNode(t, admin)
	buildLab(t, byNode)

	stop := startProxy(t, proxyKC)
	waitHealthy(t)
	fmt.Printf("\n=== kube-ipvs-proxy on %s, watching %s: traffic from %s to each IPv4 ClusterIP\n", nodeName, cfg.Host, nodeName)
	ok := true
	for _, vs := range plan.VirtualServers {
		addr, err := netip.ParseAddr(vs.Address)
		if vs.Kind != "ClusterIP" || err != nil || !addr.Is4() {
			continue
		}
		var planned []string
		for _, d := range vs.Destinations {
			if d.Weight > 0 {
				planned = append(planned, fmt.Sprintf("%s:%d w%d", d.Address, d.Port, d.Weight))
			}
		}
		target := net.JoinHostPort(vs.Address, strconv.Itoa(vs.Port))
		answered, errs, firstErr := exchange(labnet.Proto(strings.ToLower(vs.Protocol)), target)
		good := len(answered) > 0
		for name := range answered {
			good = good && slices.ContainsFunc(vs.Destinations, func(d struct {
				Address string
				Port    int
				Weight  int
			}) bool {
				return d.Address == name && d.Weight > 0
			})
		}
		verdict := "ok"
		if !good {
			verdict, ok = "MISMATCH", false
		}
		fmt.Printf("\n%s %s %s/%s (port %s)  [%s]\n", vs.Protocol, target, vs.Service, vs.Kind, vs.PortName, verdict)
		fmt.Printf("  plan:     %s\n", strings.Join(planned, ", "))
		fmt.Printf("  kernel:   %s\n", kernelDestinations(vs.Protocol, addr, vs.Port))
		fmt.Printf("  answered: %s", formatCounts(answered))
		if errs > 0 {
			fmt.Printf(" (%d failed, first: %v)", errs, firstErr)
		}
		if vs.PersistenceTimeoutSeconds > 0 {
			fmt.Printf(" (ClientIP affinity %ds: one client sticks to one backend)", vs.PersistenceTimeoutSeconds)
		}
		fmt.Println()
	}
	printMetrics(t)
	stop()
	if code := app.Run(context.Background(), vme2e.MustParse(t, "--cleanup"), io.Discard, os.Stderr); code != app.ExitOK {
		t.Fatalf("--cleanup exited %d", code)
	}
	checkNothingLeft(t)
	if !ok {
		t.Fatalf("some services were answered by backends the plan does not list (see MISMATCH above)")
	}
}

// endpointsByNode lists the IPv4 EndpointSlices and groups their
// addresses by node.
func endpointsByNode(t *testing.T, admin kubernetes.Interface) map[string][]backend {
	t.Helper()
	list, err := admin.DiscoveryV1().EndpointSlices("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list EndpointSlices: %v", err)
	}
	out := map[string][]backend{}
	for _, s := range list.Items {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.NodeName == nil {
				continue
			}
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					out[*e.NodeName] = append(out[*e.NodeName], backend{addr: ip, ports: s.Ports})
				}
			}
		}
	}
	return out
}

// buildLab gives every node with endpoints a namespace holding its pods'
// addresses (on lo) and their echo servers, linked to this node by a
// veth with 172.30.<i>.0/30; this node routes each pod address there.
func buildLab(t *testing.T, byNode map[string][]backend) {
	t.Helper()
	root, err := (*labnet.Host)(nil).Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for i, node := range slices.Sorted(maps.Keys(byNode)) {
		h, err := labnet.NewHost("pods-" + node)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		veth, err := labnet.AddVeth(root, labnet.LinkName("demo-"+node), 0, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = netlink.LinkDel(veth) })
		near, far := netip.AddrFrom4([4]byte{172, 30, byte(i + 1), 1}), netip.AddrFrom4([4]byte{172, 30, byte(i + 1), 2})
		must(t, labnet.AddAddrs(root, veth, netip.PrefixFrom(near, 30)))
		nl, err := h.Netlink()
		if err != nil {
			t.Fatal(err)
		}
		lo, err := labnet.UpLinks(nl, "lo")
		must(t, err)
		eth0, err := labnet.UpLinks(nl, "eth0")
		must(t, err)
		must(t, labnet.AddAddrs(nl, eth0, netip.PrefixFrom(far, 30)))
		must(t, nl.RouteAdd(&netlink.Route{Gw: net.IP(near.AsSlice())}))
		var pods []string
		for _, b := range byNode[node] {
			must(t, labnet.AddAddrs(nl, lo, netip.PrefixFrom(b.addr, 32)))
			must(t, root.RouteAdd(&netlink.Route{Dst: labnet.IPNet(netip.PrefixFrom(b.addr, 32)), Gw: net.IP(far.AsSlice())}))
			serve(t, h, b)
			pods = append(pods, b.addr.String())
		}
		nl.Close()
		fmt.Printf("lab: %s's pods %v in netns pods-%s via %s\n", node, pods, node, far)
	}
}

// serve starts an echo server named after the address on each of its
// ports; an address listed by several slices serves each port once.
func serve(t *testing.T, h *labnet.Host, b backend) {
	t.Helper()
	for _, p := range b.ports {
		if p.Port == nil {
			continue
		}
		addr := net.JoinHostPort(b.addr.String(), strconv.Itoa(int(*p.Port)))
		e := labnet.Echo{Name: b.addr.String()}
		if p.Protocol != nil && *p.Protocol == corev1.ProtocolUDP {
			e.ServeUDP(t, h, "udp4", addr)
		} else {
			e.ServeTCP(t, h, "tcp4", addr)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startProxy runs the real mode with the DaemonSet's flags.
func startProxy(t *testing.T, kubeconfig string) (stop func()) {
	t.Helper()
	return vme2e.StartProxy(t, io.Discard, "--kubeconfig", kubeconfig, "--hostname-override", nodeName,
		"--cluster-cidr", "10.244.0.0/16,fd00:244::/48", "--ipvs-min-sync-period", "0s",
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)
}

// waitHealthy waits for /healthz 200: the proxy has synced.
func waitHealthy(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + healthzAddr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the proxy's /healthz never answered 200")
}

// exchange counts nExchanges fresh exchanges from this node; it returns
// the answers by backend, the number of failures and the first one.
func exchange(proto labnet.Proto, addr string) (map[string]int, int, error) {
	got, errs := map[string]int{}, 0
	var first error
	for range nExchanges {
		name, _, err := labnet.Exchange(nil, proto, addr, time.Second)
		if err != nil {
			if errs++; first == nil {
				first = err
			}
			continue
		}
		got[name]++
	}
	return got, errs, first
}

func formatCounts(m map[string]int) string {
	if len(m) == 0 {
		return "nobody"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// kernelDestinations renders the IPVS virtual server's destinations.
func kernelDestinations(proto string, addr netip.Addr, port int) string {
	h, err := ipvs.New("")
	if err != nil {
		return err.Error()
	}
	defer h.Close()
	p := map[string]uint16{"TCP": 6, "UDP": 17, "SCTP": 132}[proto]
	svc := &ipvs.Service{Address: net.IP(addr.AsSlice()), Port: uint16(port), Protocol: p, AddressFamily: 2}
	dests, err := h.GetDestinations(svc)
	if err != nil {
		return "no virtual server: " + err.Error()
	}
	var out []string
	for _, d := range dests {
		out = append(out, fmt.Sprintf("%s:%d w%d", d.Address, d.Port, d.Weight))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// printMetrics prints a few of the proxy's own metrics.
func printMetrics(t *testing.T) {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	fmt.Printf("\n=== from the proxy's /metrics\n")
	for _, l := range strings.Split(string(body), "\n") {
		for _, p := range []string{"kubeproxy_sync_proxy_rules_duration_seconds_count", "kubeproxy_sync_proxy_rules_duration_seconds_sum",
			"kubeproxy_sync_proxy_rules_last_timestamp_seconds", "kube_ipvs_proxy_virtual_servers{", "kube_ipvs_proxy_netlink_ops_total{"} {
			if strings.HasPrefix(l, p) {
				fmt.Println("  " + l)
			}
		}
	}
}

// checkNothingLeft reports what --cleanup left: kube-ipvs0 fails the
// demo, IPVS virtual servers are printed.
func checkNothingLeft(t *testing.T) {
	t.Helper()
	h, err := ipvs.New("")
	if err != nil {
		t.Fatalf("ipvs handle: %v", err)
	}
	defer h.Close()
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatalf("list IPVS virtual servers: %v", err)
	}
	var left []string
	for _, s := range svcs {
		left = append(left, fmt.Sprintf("%s %s", map[uint16]string{6: "TCP", 17: "UDP", 132: "SCTP"}[s.Protocol], net.JoinHostPort(s.Address.String(), strconv.Itoa(int(s.Port)))))
	}
	_, linkErr := netlink.LinkByName("kube-ipvs0")
	if linkErr == nil {
		t.Errorf("--cleanup left kube-ipvs0")
	}
	if len(left) == 0 {
		fmt.Printf("\n=== proxy stopped; after --cleanup: no IPVS virtual servers, no kube-ipvs0\n\n")
		return
	}
	// Shown, not failed: a known gap of --cleanup, reported to its owner.
	fmt.Printf("\n=== proxy stopped; after --cleanup: no kube-ipvs0, but IPVS virtual servers LEFT BEHIND: %v\n"+
		"    (--cleanup removes the virtual servers on kube-ipvs0's addresses; NodePort ones on the node's IPs stay)\n\n", left)
}
