//go:build integration

package traffic

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestNewConnectionsSurviveSyncs: connections opened while the data plane
// re-syncs (full Resyncs that replace the nftables table, and incremental
// Applies) all succeed, from this node and from a pod, to local and
// remote endpoints, masqueraded or not.
func TestNewConnectionsSurviveSyncs(t *testing.T) {
	l := newLab(t)
	s := service("churn", []string{"10.96.7.1"})
	l.setService(s, l.ep("pod-a1"), l.ep("pod-b1"))
	plan := l.resync()
	sp, _ := l.engine.ComputeService(s.Key)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	type result struct{ ok, failed int }
	results := map[string]*result{}
	for _, from := range []*host{l.root, l.pod("pod-a3"), l.client} {
		r := &result{}
		results[from.Name] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := dialAnswered(from, "10.96.7.1:80"); err != nil {
					r.failed++
					t.Logf("from %s: %v", from.Name, err)
				} else {
					r.ok++
				}
			}
		}()
	}
	deadline := time.Now().Add(4 * time.Second)
	syncs := 0
	for time.Now().Before(deadline) {
		if err := l.dp.Resync(plan); err != nil {
			t.Errorf("Resync: %v", err)
		}
		if err := l.dp.Apply([]policy.ServicePlan{sp}); err != nil {
			t.Errorf("Apply: %v", err)
		}
		syncs += 2
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for name, r := range results {
		t.Logf("from %s during %d syncs: %d connections answered, %d failed", name, syncs, r.ok, r.failed)
		if r.failed > 0 || r.ok == 0 {
			t.Errorf("from %s: %d of %d connections failed while the data plane re-synced", name, r.failed, r.ok+r.failed)
		}
	}
}

// dialAnswered opens a TCP connection from `from` with a kernel-chosen
// source port (labnet's numbered ports would come round again within the
// hundreds of connections of this test) and reads the echo server's line.
func dialAnswered(from *host, addr string) error {
	var c net.Conn
	if err := from.Do(func() (err error) { c, err = net.DialTimeout("tcp4", addr, 2*time.Second); return err }); err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read from %s: %w", addr, err)
	}
	if line == "" {
		return fmt.Errorf("empty answer from %s", addr)
	}
	return nil
}
