//go:build integration

package traffic

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
)

// exchange sends a line and reads it back, reporting what went wrong
// instead of failing the test.
func (c *lineConn) exchange(line string) error {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	got, err := c.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if strings.TrimSpace(got) != line {
		return fmt.Errorf("read back %q, want %q", got, line)
	}
	return nil
}

// TestRepairKeepsEstablishedConnections: connections established
// through a ClusterIP (from the node itself and from a pod) and through
// a NodePort (from an off-node client), to three endpoints on three
// nodes, survive another program flushing our table's rules, flushing
// one of its sets or deleting the table, when the repair (the full
// resync the loop runs when it notices such an edit) comes before their
// next packet: the repair rewrites what is gone and resets nothing.
// A masqueraded connection that sends while the rules are gone is
// another matter: its packets leave unmasqueraded and it stalls or is
// reset (seen on 5.10 and 6.1), which is why the loop repairs within
// about half a second of the edit's notification.
func TestRepairKeepsEstablishedConnections(t *testing.T) {
	l := newLab(t)
	backends := []string{"pod-b1", "pod-c1", "pod-a1"}
	for _, p := range backends {
		l.serveLines(l.pod(p))
	}
	l.lineService("line", "10.96.22.1", 30092, backends...)
	l.resync()
	dialAll := func() []namedConn {
		return []namedConn{
			{"node-a → ClusterIP", l.dialLines(l.root, "10.96.22.1:9000")},
			{"pod-a3 → ClusterIP", l.dialLines(l.pod("pod-a3"), "10.96.22.1:9000")},
			{"client → NodePort", l.dialLines(l.client, hostPort(l.root.v4, 30092))},
		}
	}

	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: nft.TableName}
	edit := func(f func(c *nftables.Conn)) func() error {
		return func() error {
			return labnet.AsAnotherProcess("nft", func() error {
				c, err := nftables.New()
				if err != nil {
					return err
				}
				f(c)
				return c.Flush()
			})
		}
	}
	for _, tc := range []struct {
		what string
		edit func() error
	}{
		{"table's rules flushed", edit(func(c *nftables.Conn) { c.FlushTable(table) })},
		{"one set flushed", edit(func(c *nftables.Conn) { c.FlushSet(&nftables.Set{Table: table, Name: "service-ports-v4"}) })},
		{"table deleted", edit(func(c *nftables.Conn) { c.DelTable(table) })},
	} {
		conns := dialAll()
		for _, c := range conns {
			if err := c.exchange("established"); err != nil {
				t.Fatalf("%s, before %s: %v", c.name, tc.what, err)
			}
		}
		if err := tc.edit(); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		l.resync()
		survived := 0
		for _, c := range conns {
			if err := c.exchange("repaired"); err != nil {
				t.Errorf("%s, then the repair: %s: %v", tc.what, c.name, err)
				continue
			}
			survived++
		}
		t.Logf("%s, then the repair: %d of %d established connections work", tc.what, survived, len(conns))
		for _, c := range dialAll() {
			if err := c.exchange("new after the repair"); err != nil {
				t.Errorf("%s: %s, a new connection after the repair: %v", tc.what, c.name, err)
			}
		}
	}
}

type namedConn struct {
	name string
	*lineConn
}
