package nft

import (
	"bytes"
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Tests and benchmarks of the set element reader on the running kernel,
// each in a network namespace of its own (they need root, and skip
// without it): the table they write is gone with the namespace.

// newTestNetns makes a network namespace and returns a handle on it,
// closed when the test ends; it skips the test when it cannot.
func newTestNetns(tb testing.TB) int {
	tb.Helper()
	fd, errc := -1, make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		err := unix.Unshare(unix.CLONE_NEWNET)
		if err == nil {
			fd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		tb.Skipf("cannot make a network namespace here (needs root): %v", err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	return fd
}

// enterNetns moves the calling goroutine, for good, onto a thread of its
// own in namespace ns: the thread ends with the goroutine.
func enterNetns(tb testing.TB, ns int) {
	tb.Helper()
	runtime.LockOSThread()
	if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
		tb.Fatalf("enter the test's network namespace: %v", err)
	}
}

// inNetns runs fn on a goroutine of its own in namespace ns; fn reports
// with t.Error and returns.
func inNetns(t *testing.T, ns int, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			t.Errorf("enter the test's network namespace: %v", err)
			return
		}
		fn()
	}()
	<-done
}

func cloneElement(e nftables.SetElement) nftables.SetElement {
	e.Key, e.KeyEnd, e.Val = bytes.Clone(e.Key), bytes.Clone(e.KeyEnd), bytes.Clone(e.Val)
	return e
}

// TestEachSetElementReadsWhatGetSetElementsReadsOnTheKernel: for every
// set of a table with thousands of elements in sets, interval and
// concatenated sets, verdict and data maps (and the rules' anonymous
// sets), the reader returns what google/nftables' GetSetElements
// returns, in the same order, on one socket it keeps; a missing set or
// table is ENOENT.
func TestEachSetElementReadsWhatGetSetElementsReadsOnTheKernel(t *testing.T) {
	ns := newTestNetns(t)
	inNetns(t, ns, func() {
		w, err := NewLinux(testConfig)
		if err != nil {
			t.Error(err)
			return
		}
		if err := w.Resync(variedServices(1000)); err != nil {
			t.Errorf("Resync: %v", err)
			return
		}
		c := w.conn.(*linuxConn)
		sets, err := c.GetSets(w.table)
		if err != nil {
			t.Errorf("GetSets: %v", err)
			return
		}
		total, fd := 0, -1
		for _, s := range sets {
			want, err := c.GetSetElements(s)
			if err != nil {
				t.Errorf("GetSetElements %s: %v", s.Name, err)
				continue
			}
			var got []nftables.SetElement
			if err := c.EachSetElement(s, func(e nftables.SetElement) error {
				got = append(got, cloneElement(e))
				return nil
			}); err != nil {
				t.Errorf("EachSetElement %s: %v", s.Name, err)
				continue
			}
			if fd == -1 {
				fd = c.elems.s.fd
			} else if c.elems.s.fd != fd {
				t.Errorf("set %s read on socket %d, the first on %d", s.Name, c.elems.s.fd, fd)
			}
			total += len(got)
			if len(got) != len(want) {
				t.Errorf("set %s: %d elements, GetSetElements %d", s.Name, len(got), len(want))
				continue
			}
			for i := range want {
				if d := elementDiff(got[i], want[i]); d != "" {
					t.Errorf("set %s element %d: %s", s.Name, i, d)
				}
			}
		}
		if total < 3000 || len(sets) <= numSets() {
			t.Errorf("read %d elements of %d sets, want thousands of every set's and the anonymous ones'", total, len(sets))
		}
		t.Logf("%d elements of %d sets read alike", total, len(sets))
		missing := []*nftables.Set{
			{Table: w.table, Name: "missing"},
			{Table: &nftables.Table{Family: nftables.TableFamilyINet, Name: "missing"}, Name: probeSet},
		}
		for _, s := range missing {
			if err := c.EachSetElement(s, func(nftables.SetElement) error { return nil }); !errors.Is(err, unix.ENOENT) {
				t.Errorf("set %s of table %s: %v, want ENOENT", s.Name, s.Table.Name, err)
			}
		}
		if err := c.EachSetElement(sets[0], func(nftables.SetElement) error { return nil }); err != nil || c.elems.s.fd != fd {
			t.Errorf("a read after errors: %v, on socket %d, want the first's %d", err, c.elems.s.fd, fd)
		}
	})
}

// TestRepairFindsHandEditsOnTheKernel: a Repair of a table read with the
// reader finds an element deleted by hand, one added, a verdict and a
// data map value changed and an interval deleted, repairs exactly those
// in place, and then finds nothing.
func TestRepairFindsHandEditsOnTheKernel(t *testing.T) {
	ns := newTestNetns(t)
	inNetns(t, ns, func() {
		w, err := NewLinux(testConfig)
		if err != nil {
			t.Error(err)
			return
		}
		plan := fullPlan()
		if err := w.Resync(plan); err != nil {
			t.Errorf("Resync: %v", err)
			return
		}
		c := w.conn.(*linuxConn)
		snapshot := func() map[string][]string {
			out := map[string][]string{}
			for _, s := range newSets(w.table) {
				elems, err := c.GetSetElements(s)
				if err != nil {
					t.Errorf("GetSetElements %s: %v", s.Name, err)
				}
				for _, e := range elems {
					out[s.Name] = append(out[s.Name], elementKey(e)+"/"+string(e.Val))
				}
				slices.Sort(out[s.Name])
			}
			return out
		}
		want := snapshot()
		sets := newSets(w.table)
		set := func(base string) *nftables.Set { return sets[idOf(base, familyV4)] }
		lbKey := servicePort4("192.0.2.1", 443)
		via := servicePort4("192.168.1.10", 30080)
		empty := servicePort4("10.96.0.50", 80)
		edits := []error{
			c.SetDeleteElements(set(setServicePorts), []nftables.SetElement{{Key: servicePort4("10.96.0.10", 80)}}),
			c.SetAddElements(set(setServiceIPs), []nftables.SetElement{{Key: []byte{10, 96, 9, 9}}}),
			c.SetDeleteElements(set(setEmptyServices), []nftables.SetElement{{Key: empty}}),
			c.SetAddElements(set(setEmptyServices), []nftables.SetElement{{Key: empty, VerdictData: &expr.Verdict{Kind: expr.VerdictDrop}}}),
			c.SetDeleteElements(set(setInternalVia), []nftables.SetElement{{Key: via}}),
			c.SetAddElements(set(setInternalVia), []nftables.SetElement{{Key: via, Val: []byte{10, 96, 0, 61, 0, 80, 0, 0}}}),
			c.SetDeleteElements(set(setLBSourceAllowed), []nftables.SetElement{{
				Key: append(slices.Clone(lbKey), 203, 0, 113, 7), KeyEnd: append(slices.Clone(lbKey), 203, 0, 113, 7)}}),
			c.Flush(),
		}
		if err := errors.Join(edits...); err != nil {
			t.Errorf("hand edits: %v", err)
			return
		}
		for _, step := range []struct {
			name          string
			added, delete int
		}{
			{"the hand edits", 4, 3},
			{"nothing left", 0, 0},
		} {
			if err := w.Repair(); err != nil {
				t.Errorf("Repair of %s: %v", step.name, err)
				return
			}
			if st := w.LastResync(); st.Rebuilt || st.Added != step.added || st.Deleted != step.delete {
				t.Errorf("Repair of %s: %+v, want %d adds and %d deletes in place", step.name, st, step.added, step.delete)
			}
		}
		got := snapshot()
		for name, elems := range want {
			if !slices.Equal(got[name], elems) {
				t.Errorf("set %s after the repair:\n%q\nwant\n%q", name, got[name], elems)
			}
		}
	})
}

// BenchmarkReadTable10000 reads every set of a table of 10,000 ClusterIP
// services (5 elements each) from the kernel: with google/nftables'
// GetSetElements alone, and with the drift check as it was over it
// (each element converted with kernelElement and looked up in the
// mirror); with EachSetElement alone, and with setDrift over it. One op
// is the whole table.
func BenchmarkReadTable10000(b *testing.B) {
	ns := newTestNetns(b)
	var w *Writer
	var err error
	setup := make(chan struct{})
	go func() {
		defer close(setup)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err = unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			return
		}
		if w, err = NewLinux(testConfig); err == nil {
			err = w.Resync(manyServices(10000))
		}
	}()
	<-setup
	if err != nil {
		b.Fatal(err)
	}
	c := w.conn.(*linuxConn)
	sets := newSets(w.table)
	bench := func(name string, read func(id setID, s *nftables.Set) (int, error)) {
		b.Run(name, func(b *testing.B) {
			enterNetns(b, ns)
			b.ReportAllocs()
			elems := 0
			for b.Loop() {
				elems = 0
				for id, s := range sets {
					n, err := read(setID(id), s)
					if err != nil {
						b.Fatalf("set %s: %v", s.Name, err)
					}
					elems += n
				}
			}
			b.ReportMetric(float64(elems), "elements/op")
		})
	}
	bench("GetSetElements", func(_ setID, s *nftables.Set) (int, error) {
		elems, err := c.GetSetElements(s)
		return len(elems), err
	})
	bench("GetSetElements+kernelElement", func(id setID, s *nftables.Set) (int, error) {
		elems, err := c.GetSetElements(s)
		if err != nil || id.def().base == setClusterCIDRs {
			return len(elems), err
		}
		for _, e := range elems {
			eid, v, err := kernelElement(id, e)
			if err != nil {
				return 0, err
			}
			if st := w.mirror.installed(eid); !st.present || st.v != v {
				return 0, errors.New("drift")
			}
		}
		return len(elems), nil
	})
	bench("EachSetElement", func(_ setID, s *nftables.Set) (int, error) {
		n := 0
		err := c.EachSetElement(s, func(nftables.SetElement) error { n++; return nil })
		return n, err
	})
	bench("setDrift", func(id setID, s *nftables.Set) (int, error) {
		d, n, err := w.setDrift(w.mirror, id, s)
		if err == nil && len(d.add)+len(d.del) > 0 {
			err = errors.New("drift")
		}
		return n, err
	})
}
