//go:build integration

package nftwriter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestAHandEditOfOneSetIsSeenAtOnceOursAreNot: against the kernel's own
// notifications, the writer's transactions (a Resync, an Apply) are not
// foreign edits; one set flushed by another program is, within a second,
// and Check turns it into a Resync that puts the elements back. The flush
// is also the marker for ours: the kernel notifies transactions in order
// and Check reports the first foreign edit it was told of, so an error
// naming the flush's "nft", not us, proves our writes before it were
// taken for ours.
func TestAHandEditOfOneSetIsSeenAtOnceOursAreNot(t *testing.T) {
	w := newWriter(t)
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	self, err := nft.SelfName()
	if err != nil {
		t.Fatal(err)
	}
	f := nft.NewForeignEdits(nft.TableName, self)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := nft.WatchForeignEdits(ctx, f); err != nil {
		t.Fatalf("WatchForeignEdits: %v", err)
	}
	w.WatchEdits(f)

	// Ours: one service's change, then the full plan again.
	web := servicePlan(plan, "default/web")
	web.VirtualServers = nil
	if err := w.Apply([]policy.ServicePlan{web}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}

	c := newConn(t)
	set := &nftables.Set{Table: ourTable, Name: "service-ports-v4"}
	before, err := c.GetSetElements(set)
	if err != nil || len(before) == 0 {
		t.Fatalf("service-ports-v4 before: %d elements, %v", len(before), err)
	}
	if err := labnet.AsAnotherProcess("nft", func() error {
		c := newConn(t)
		c.FlushSet(set)
		return c.Flush()
	}); err != nil {
		t.Fatalf("flush set as nft: %v", err)
	}
	start := time.Now()
	for {
		err := w.Check()
		if errors.Is(err, nft.ErrNeedsResync) {
			t.Logf("Check %v after the flush: %v", time.Since(start).Round(time.Millisecond), err)
			if !strings.Contains(err.Error(), `changed by "nft"`) {
				t.Errorf("Check: %v; want the flush by nft as the first foreign edit, our own writes before it not one", err)
			}
			break
		}
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if time.Since(start) > time.Second {
			t.Fatal("the flushed set not reported within 1 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	after, err := c.GetSetElements(set)
	if err != nil || len(after) != len(before) {
		t.Errorf("service-ports-v4 after the Resync: %d elements, %v; want %d", len(after), err, len(before))
	}
}
