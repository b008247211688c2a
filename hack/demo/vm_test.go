//go:build integration

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/vme2e"
)

const (
	nodeName    = "node-a"
	metricsAddr = "127.0.0.1:10249"
	healthzAddr = "127.0.0.1:10256"
)

// planFile is the part of the dry-run JSON plan the demo reads.
type planFile struct {
	VirtualServers []planVS
	HealthChecks   []struct {
		Service             string
		NodePort            int
		LocalReadyEndpoints int
	}
}

// planVS is one virtual server of the plan.
type planVS struct {
	Service, PortName, Kind, Address, Protocol string
	Port                                       int
	Scheduler, TrafficPolicy, Masquerade       string
	WhenEmpty, Reason                          string
	PersistenceTimeoutSeconds                  int
	NoTrack                                    bool
	SourceRanges                               []string
	Destinations                               []planDest

	expected bool // destinations the demo expects, not the golden plan's
}

type planDest struct {
	Address      string
	Port, Weight int
}

// TestDemoInVM builds the lab, runs the proxy, sends the traffic of
// every section and fails if any row did not match.
func TestDemoInVM(t *testing.T) {
	proxyKC, adminKC, planPath := os.Getenv(vme2e.EnvProxyKubeconfig), os.Getenv(vme2e.EnvAdminKubeconfig), os.Getenv(envPlan)
	if proxyKC == "" || adminKC == "" || planPath == "" {
		t.Skip("run by the host half: make demo")
	}
	if err := vme2e.BringUpNetwork(); err != nil {
		t.Fatal(err)
	}
	d := &demo{t: t, ok: true}
	data, err := os.ReadFile(planPath)
	if err == nil {
		err = json.Unmarshal(data, &d.plan)
	}
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKC)
	if err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(cfg)
	d.lab = buildLab(t, admin)

	fmt.Printf("\n=== kube-ipvs-proxy runs on %s in real mode, watching %s; its plan should be examples/plans/node-a.json\n", nodeName, cfg.Host)
	start := time.Now()
	stop := startProxy(t, proxyKC)
	d.waitSynced(start)
	d.fromNode()
	d.fromPod()
	d.fromOutside(admin)
	printMetrics(t)
	d.localCheckout(admin)
	stop()
	if code := app.Run(context.Background(), vme2e.MustParse(t, "--cleanup"), io.Discard, os.Stderr); code != app.ExitOK {
		t.Fatalf("--cleanup exited %d", code)
	}
	checkNothingLeft(t)
	if !d.ok {
		t.Fatalf("some rows did not match the plan (see MISMATCH above)")
	}
}

// fromNode: node-a's own connections to every ClusterIP.
func (d *demo) fromNode() {
	section("1. From %s itself to every ClusterIP: a host-network client, outside --cluster-cidr, so masqueraded", nodeName)
	for _, v := range d.plan.VirtualServers {
		if v.Kind == "ClusterIP" {
			d.served(nil, v, masqueraded("masquerade OffCluster, source off-cluster"), false, sourceLine(v.addr()))
		}
	}
}

// sourceLine shows the source node-a's own connections to vip have,
// which no backend may see if they were masqueraded.
func sourceLine(vip netip.Addr) func(*row, outcome) {
	return func(r *row, o outcome) {
		src, err := sourceFor(vip)
		if err != nil {
			r.fail("source address toward %s: %v", vip, err)
			return
		}
		if o.peers[src] > 0 {
			r.add("source", "%s, seen by the backends as is: not masqueraded", src)
			r.fail("the plan masquerades off-cluster sources")
			return
		}
		r.add("source", "%s, which no backend saw: masqueraded", src)
	}
}

// fromPod: a pod of node-a to every ClusterIP; NOTRACK shows in
// conntrack.
func (d *demo) fromPod() {
	p := d.lab.pod
	section("2. From pod-client (%s, %s), a pod on %s, to every ClusterIP: inside --cluster-cidr, so not masqueraded;\n"+
		"    plan and kernel as in 1. (checked again, shown if they differ); conntrack counts the pod's entries to the virtual server after the exchanges", p.v4, p.v6, nodeName)
	for _, v := range d.plan.VirtualServers {
		if v.Kind != "ClusterIP" {
			continue
		}
		src := p.v4
		if v.addr().Is6() {
			src = p.v6
		}
		d.served(p, v, kept(p, "not masqueraded"), true, conntrackLine(src, v))
	}
}

// conntrackLine checks that the pod's connections were tracked, or not
// under NOTRACK.
func conntrackLine(src netip.Addr, v planVS) func(*row, outcome) {
	return func(r *row, _ outcome) {
		n, err := conntrackEntries(src, v.Protocol, v.addr(), uint16(v.Port))
		switch {
		case err != nil:
			r.add("conntrack", "%v", err)
			r.fail("cannot list conntrack")
		case v.NoTrack && n == 0:
			r.add("conntrack", "no entries: NOTRACK, as planned")
		case v.NoTrack:
			r.add("conntrack", "%d entries", n)
			r.fail("the plan says NOTRACK, yet the pod's connections were tracked")
		case n > 0:
			r.add("conntrack", "%d entries (tracked, as planned: no NOTRACK)", n)
		default:
			r.add("conntrack", "no entries")
			r.fail("the plan does not say NOTRACK, yet nothing was tracked")
		}
	}
}

// startProxy runs the real mode with the DaemonSet's flags.
func startProxy(t *testing.T, kubeconfig string) (stop func()) {
	t.Helper()
	return vme2e.StartProxy(t, io.Discard, "--kubeconfig", kubeconfig, "--hostname-override", nodeName,
		"--cluster-cidr", "10.244.0.0/16,fd00:244::/32", "--ipvs-min-sync-period", "0s",
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)
}

// waitSynced waits for /healthz 200 and then for the first applied sync
// (kubeproxy_sync_proxy_rules_last_timestamp_seconds appears): like
// kube-proxy's, /healthz answers 200 from the start, before the first
// sync. It prints both times and how much of the plan the kernel held at
// the first.
func (d *demo) waitSynced(start time.Time) {
	d.t.Helper()
	healthy, synced := false, false
	for deadline := time.Now().Add(90 * time.Second); !synced; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			d.t.Fatalf("after 90s: /healthz 200 %v, first sync applied %v", healthy, synced)
		}
		if !healthy {
			if resp, err := http.Get("http://" + healthzAddr + "/healthz"); err == nil {
				resp.Body.Close()
				if healthy = resp.StatusCode == http.StatusOK; healthy {
					fmt.Printf("  /healthz answered 200 %v after the start; the kernel then held %d of the plan's %d virtual servers as planned\n",
						time.Since(start).Round(time.Millisecond), d.kernelMatches(), len(d.plan.VirtualServers))
				}
			}
			continue
		}
		if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			synced = strings.Contains(string(body), "\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{")
		}
	}
	fmt.Printf("  its first sync was applied %v after the start (kubeproxy_sync_proxy_rules_last_timestamp_seconds set); the kernel then held %d of %d\n",
		time.Since(start).Round(time.Millisecond), d.kernelMatches(), len(d.plan.VirtualServers))
}

// kernelMatches counts the plan's virtual servers that the kernel holds
// with the planned destinations.
func (d *demo) kernelMatches() int {
	n := 0
	for _, v := range d.plan.VirtualServers {
		if got, ok, err := kernelVS(v.Protocol, v.addr(), v.Port); ok && err == nil && slices.Equal(got, v.planned()) {
			n++
		}
	}
	return n
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
	section("The proxy's own /metrics, examples/ as applied (a selection)")
	for _, l := range strings.Split(string(body), "\n") {
		for _, p := range []string{"kubeproxy_sync_proxy_rules_duration_seconds_count", "kubeproxy_sync_proxy_rules_duration_seconds_sum",
			"kubeproxy_sync_proxy_rules_last_timestamp_seconds", "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
			"kubeproxy_sync_proxy_rules_endpoint_changes_total", "kubeproxy_sync_proxy_rules_service_changes_total",
			"kube_ipvs_proxy_virtual_servers{", "kube_ipvs_proxy_netlink_ops_total{"} {
			if strings.HasPrefix(l, p) {
				fmt.Println("  " + l)
			}
		}
	}
}

// checkNothingLeft fails the demo if --cleanup left kube-ipvs0 or any
// IPVS virtual server (NodePort ones included: the table records them).
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
	// The lab adds no IPVS virtual server of its own: all were the proxy's.
	t.Errorf("--cleanup left IPVS virtual servers: %v", left)
}
