//go:build !integration

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

const nodeName = "node-a"

// syncPeriod is short, so that the apiserver's outage sees periodic
// resyncs (which must program the last plan, not an empty one).
const syncPeriod = time.Second

// TestProxyAgainstARealAPIServer runs the proxy's watch loop, as the
// DaemonSet would, with the ServiceAccount and RBAC of deploy/base, and
// proves: the plan converges; one endpoint change is one incremental sync
// touching only that service; metrics and healthz answer; an invalid
// annotation yields an Event; the apiserver going away keeps the state
// and its return resumes the loop.
func TestProxyAgainstARealAPIServer(t *testing.T) {
	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	token := proxyToken(t, c)
	proxyClient := kubernetes.NewForConfigOrDie(c.TokenConfig(token))
	if _, err := proxyClient.CoreV1().Services("default").Create(ctx, webService(), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the proxy's ServiceAccount creating a Service: %v, want Forbidden", err)
	}

	createNode(t, admin, nodeName, "zone-a", "192.0.2.1")
	createNode(t, admin, "node-b", "zone-b", "192.0.2.2")
	if _, err := admin.CoreV1().Services("default").Create(ctx, webService(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sliceClient := admin.DiscoveryV1().EndpointSlices("default")
	if _, err := sliceClient.Create(ctx, webSlice(endpoint{"10.244.1.5", nodeName, "zone-a"}, endpoint{"10.244.2.5", "node-b", "zone-b"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The proxy, with its token and the DaemonSet's command line.
	metricsAddr, healthzAddr := freeAddr(t), freeAddr(t)
	dp := runProxy(t, c, token, "--ipvs-min-sync-period", "0s", "--ipvs-sync-period", syncPeriod.String(),
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)

	converged := waitFor(t, "the first sync", func() bool { return len(dp.snapshot()) > 0 })
	first := dp.snapshot()[0]
	if got := planDestinations(first.plan, "default/web"); !first.full || !slices.Equal(got, []string{"10.244.1.5"}) {
		t.Fatalf("first sync: full=%v web destinations %v, want a Resync with the zone-a endpoint", first.full, got)
	}
	t.Logf("converged in %v with one Resync of %d virtual servers", converged, len(first.plan.VirtualServers))

	t.Run("one endpoint change is one incremental sync of that service", func(t *testing.T) {
		before := len(dp.snapshot())
		cur, err := sliceClient.Get(ctx, "web-abc12", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next := webSlice(endpoint{"10.244.1.5", nodeName, "zone-a"}, endpoint{"10.244.1.6", nodeName, "zone-a"}, endpoint{"10.244.2.5", "node-b", "zone-b"})
		next.ResourceVersion = cur.ResourceVersion
		next.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": time.Now().UTC().Format(time.RFC3339Nano)}
		start := time.Now()
		if _, err := sliceClient.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the incremental sync", func() bool { return len(applies(dp.snapshot()[before:])) > 0 })
		elapsed := time.Since(start)
		// The marker: a new Service, whose Apply the loop makes after
		// every sync the endpoint change caused.
		marker := policy.ServiceKey{Namespace: "default", Name: "marker"}
		if _, err := admin.CoreV1().Services("default").Create(ctx, tcpService(marker.Namespace, marker.Name, "10.96.0.97", 80), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		applied := func(c call) bool {
			return slices.ContainsFunc(c.changes, func(sp policy.ServicePlan) bool { return sp.Service == marker })
		}
		waitFor(t, "the marker's Apply", func() bool { return slices.ContainsFunc(applies(dp.snapshot()[before:]), applied) })
		calls := applies(dp.snapshot()[before:]) // periodic resyncs aside
		if len(calls) != 2 || len(calls[0].changes) != 1 || len(calls[1].changes) != 1 || !applied(calls[1]) {
			t.Fatalf("after one endpoint change and then the marker Service: %d Applies %+v, want one Apply of one service, then the marker's alone", len(calls), calls)
		}
		sp := calls[0].changes[0]
		if sp.Service != (policy.ServiceKey{Namespace: "default", Name: "web"}) || !slices.Equal(destinations(sp), []string{"10.244.1.5", "10.244.1.6"}) {
			t.Errorf("the Apply carried %s with %v, want default/web with both zone-a endpoints", sp.Service, destinations(sp))
		}
		t.Logf("one endpoint change: 1 sync (Apply of 1 service, %d virtual servers) %v after the update", len(sp.VirtualServers), elapsed)
	})

	t.Run("metrics and healthz answer", func(t *testing.T) {
		code, body := get(t, "http://"+metricsAddr+"/metrics")
		for _, want := range []string{"kubeproxy_sync_proxy_rules_duration_seconds_count", "kubeproxy_network_programming_duration_seconds_count",
			"kubeproxy_sync_proxy_rules_endpoint_changes_total", "kube_ipvs_proxy_virtual_servers"} {
			if code != 200 || !strings.Contains(body, want) {
				t.Errorf("/metrics %d lacks %s", code, want)
			}
		}
		if code, body := get(t, "http://"+metricsAddr+"/proxyMode"); code != 200 || body != "ipvs" {
			t.Errorf("/proxyMode %d %q, want ipvs", code, body)
		}
		for _, path := range []string{"/healthz", "/livez"} {
			if code, body := get(t, "http://"+healthzAddr+path); code != 200 || !strings.Contains(body, `"lastUpdated"`) {
				t.Errorf("%s: %d %s", path, code, body)
			}
		}
	})

	t.Run("an invalid annotation yields an Event", func(t *testing.T) {
		svc, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Annotations = map[string]string{policy.AnnotationScheduler: "fastest"}
		if _, err := admin.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the InvalidAnnotation event", func() bool {
			evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Reason == "InvalidAnnotation" && e.InvolvedObject.Name == "web" && strings.Contains(e.Message, policy.AnnotationScheduler) {
					t.Logf("event: %s %s: %s", e.Type, e.Reason, e.Message)
					return true
				}
			}
			return false
		})
	})

	t.Run("the apiserver going away keeps the state; its return resumes", func(t *testing.T) {
		before := len(dp.snapshot())
		if err := c.Stop(); err != nil {
			t.Logf("stop: %v", err)
		}
		// The marker: the second periodic resync while it is down; any
		// other call would have come before it.
		waitFor(t, "two periodic resyncs while the apiserver is down", func() bool { return len(dp.snapshot()[before:]) >= 2 })
		want := []string{"10.244.1.5", "10.244.1.6"}
		outage := dp.snapshot()[before:]
		for _, c := range outage {
			if !c.full || !slices.Equal(planDestinations(c.plan, "default/web"), want) {
				t.Fatalf("while the apiserver was down the data plane got %+v; want only resyncs of the last plan", c)
			}
		}
		t.Logf("while the apiserver was down: %d data plane calls (resyncs of the unchanged plan only)", len(outage))
		before = len(dp.snapshot())
		if err := c.Restart(); err != nil {
			t.Fatalf("restart: %v", err)
		}
		if err := sliceClient.Delete(ctx, "web-abc12", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the deletion to reach the data plane", func() bool {
			for _, c := range dp.snapshot()[before:] {
				for _, sp := range c.changes {
					if sp.Service.Name == "web" && len(destinations(sp)) == 0 {
						return true
					}
				}
			}
			return false
		})
		for _, c := range dp.snapshot()[before:] {
			if c.full && len(c.plan.VirtualServers) == 0 {
				t.Errorf("a Resync with an empty plan (a flush) happened: %+v", c)
			}
		}
	})
}

// applies keeps the Apply calls: the incremental syncs.
func applies(calls []call) []call {
	var out []call
	for _, c := range calls {
		if !c.full {
			out = append(out, c)
		}
	}
	return out
}
