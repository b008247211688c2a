//go:build !integration

package e2e

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDryRunWatchTouchesNothing: `--dry-run --kubeconfig` prints the plan
// it watches and nothing else: the health and metrics addresses it is
// given stay closed, and an invalid annotation, which the real mode
// reports with an Event, writes none, by the time a later Service is
// printed.
func TestDryRunWatchTouchesNothing(t *testing.T) {
	c, admin := startWithWeb(t)
	ctx := context.Background()
	bad := tcpService("default", "bad", "10.96.0.99", 80)
	bad.Annotations = map[string]string{"kube-ipvs-proxy.io/scheduler": "bogus"}
	if _, err := admin.CoreV1().Services("default").Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	metricsAddr, healthzAddr := freeAddr(t), freeAddr(t)
	opts, err := app.ParseFlags([]string{"--dry-run", "--kubeconfig", c.KubeconfigForToken(proxyToken(t, c)),
		"--hostname-override", nodeName, "--output", "text",
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr}, &bytes.Buffer{})
	if err == nil {
		err = opts.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Watch(wctx, opts, (&recorder{}).open, out) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	waitFor(t, "the printed plan", func() bool { return strings.Contains(out.String(), "default/bad") })
	// The marker: a later Service in a printed plan. The informer hands the
	// proxy default/bad before it, and the annotation's Event would be
	// recorded as default/bad is handed over; the listeners would be
	// started before the first sync. (Both then finish on goroutines of
	// their own, client-go's Event broadcaster and the servers': the
	// marker bounds when they start, the round trips of a whole Service
	// change through the apiserver, not when they land.)
	after := tcpService("default", "after", "10.96.0.98", 80)
	if _, err := admin.CoreV1().Services("default").Create(ctx, after, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the marker default/after printed", func() bool { return strings.Contains(out.String(), "default/after") })
	for _, addr := range []string{metricsAddr, healthzAddr} {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("--dry-run listens on %s", addr)
		}
	}
	evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		// The apiserver's own controllers write Events too (its ClusterIP
		// repair loop: ClusterIPNotAllocated on the kubernetes Service).
		if e.Source.Component != "kube-ipvs-proxy" && e.ReportingController != "kube-ipvs-proxy" {
			continue
		}
		t.Errorf("--dry-run wrote an Event: %s %s on %s: %s", e.Type, e.Reason, e.InvolvedObject.Name, e.Message)
	}
}
