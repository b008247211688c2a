//go:build !integration

package e2e

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// brokenService is a data plane on which one service's virtual servers
// always fail, as a scheduler module the node cannot load would make
// them: the failure is that service's (proxier.DataPlaneWriter.ServiceFailures).
type brokenService struct {
	recorder
	broken policy.ServiceKey
	mu     sync.Mutex
	fails  []proxier.ServiceFailure
	next   time.Time
}

func (b *brokenService) note(sps []policy.ServicePlan, plan *policy.Plan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fails = nil
	has := false
	for _, sp := range sps {
		has = has || sp.Service == b.broken
	}
	if plan != nil {
		for _, vs := range plan.VirtualServers {
			has = has || vs.Service == b.broken
		}
	}
	if has || !b.next.IsZero() {
		b.fails = []proxier.ServiceFailure{{Service: b.broken, Reason: "KernelError",
			Err: errors.New("add virtual server 10.96.0.20:80/TCP: no such file or directory")}}
		b.next = time.Now().Add(time.Second)
	}
}

func (b *brokenService) Apply(c []policy.ServicePlan) error {
	b.note(c, nil)
	return b.recorder.Apply(c)
}

func (b *brokenService) Resync(p policy.Plan) error {
	b.note(nil, &p)
	return b.recorder.Resync(p)
}

func (b *brokenService) ServiceFailures() []proxier.ServiceFailure {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fails
}

func (b *brokenService) Failing() []policy.ServiceKey {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next.IsZero() {
		return nil
	}
	return []policy.ServiceKey{b.broken}
}

func (b *brokenService) NextRetry() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next
}

func (b *brokenService) Check() error { return nil }

// TestServiceFailureEventOnTheService: a failure confined to one service
// lands as one Warning Event on that Service (its UID included, so that
// kubectl describe shows it), while /healthz stays 200 and the syncs
// stay incremental.
func TestServiceFailureEventOnTheService(t *testing.T) {
	c, admin := startWithWeb(t)
	ctx := context.Background()
	broken := webService()
	broken.Name, broken.Spec.ClusterIP = "broken", "10.96.0.20"
	created, err := admin.CoreV1().Services("default").Create(ctx, broken, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dp := &brokenService{broken: policy.ServiceKey{Namespace: "default", Name: "broken"}}
	healthzAddr := freeAddr(t)
	watch(t, c.Kubeconfig("admin"), healthzAddr, dp, "--ipvs-sync-period", "1h")
	waitFor(t, "the FailedToProgram Event", func() bool {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == proxier.ReasonSyncFailed && e.InvolvedObject.Name == "broken" {
				t.Logf("event: %s %s on %s (uid %s): %s", e.Type, e.Reason, e.InvolvedObject.Name, e.InvolvedObject.UID, e.Message)
				if e.InvolvedObject.UID != created.UID || e.Type != "Warning" || !strings.Contains(e.Message, "10.96.0.20:80/TCP") {
					t.Errorf("event %+v: want a Warning on the Service's UID %s naming 10.96.0.20:80/TCP", e.InvolvedObject, created.UID)
				}
				return true
			}
		}
		return false
	})
	// The marker: two retries of the broken Service after the first sync,
	// a second apart: each is a data plane call, an Apply of no changed
	// service (the writer retries what failed) or, wrongly, a full resync.
	waitFor(t, "two retries of default/broken", func() bool { return len(dp.snapshot()) >= 3 })
	if code, body := getQuietPath(healthzAddr, "/healthz"); code != 200 {
		t.Errorf("/healthz %d %s, want 200", code, body)
	}
	full := 0
	for _, c := range dp.snapshot() {
		if c.full {
			full++
		}
	}
	if full != 1 {
		t.Errorf("%d full resyncs, want 1: the other syncs are incremental retries", full)
	}
}
