//go:build !integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
)

// TestClientGoFeatureGatesThroughTheFlag: --feature-gates sets client-go's
// gates as kube-proxy's does. By default the informers stream their
// initial state (a WATCH with sendInitialEvents); with
// WatchListClient=false they LIST, as the apiserver's request counts show.
func TestClientGoFeatureGatesThroughTheFlag(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantLists bool
	}{
		{"by default the informers stream", nil, false},
		{"WatchListClient=false makes them list", []string{"--feature-gates", "WatchListClient=false"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, admin := startWithWeb(t)
			ctx := context.Background()
			if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, webSlice(endpoint{addr: "10.1.0.1", node: nodeName, zone: "zone-a"}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The gates are the process's: give client-go its own back
			// after the proxy has stopped (cleanups run last first).
			before := clientfeatures.FeatureGates()
			t.Cleanup(func() { clientfeatures.ReplaceFeatureGates(before) })
			lists0 := endpointSliceRequests(t, admin, "LIST")
			dp := &recorder{}
			watch(t, c.Kubeconfig("admin"), freeAddr(t), dp, tc.args...)
			waitFor(t, "the first sync", func() bool { return len(dp.snapshot()) > 0 })
			lists := endpointSliceRequests(t, admin, "LIST") - lists0
			t.Logf("the proxy's informers made %v LISTs of EndpointSlices", lists)
			if got := lists > 0; got != tc.wantLists {
				t.Errorf("%v LISTs of EndpointSlices, want lists: %t", lists, tc.wantLists)
			}
		})
	}
}

// endpointSliceRequests sums the apiserver's apiserver_request_total for
// EndpointSlices with verb.
func endpointSliceRequests(t *testing.T, admin *kubernetes.Clientset, verb string) float64 {
	t.Helper()
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("the apiserver's /metrics: %v", err)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "apiserver_request_total{") || !strings.Contains(l, `resource="endpointslices"`) ||
			!strings.Contains(l, `verb="`+verb+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("the apiserver's /metrics: %q: %v", l, err)
		}
		sum += v
	}
	return sum
}
