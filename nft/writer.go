package nft

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Config is the node-wide configuration of the table.
type Config struct {
	// ClusterCIDRs are the pod networks (--cluster-cidr): traffic to an
	// OffCluster virtual server from outside them is masqueraded.
	ClusterCIDRs []netip.Prefix
	// PodInterface, when set, tells this node's pods by the interface
	// their packets come in on instead of by ClusterCIDRs, as kube-proxy's
	// detectLocalMode BridgeInterface (the bridge's name) or, with
	// PodInterfacePrefix, InterfaceNamePrefix (the prefix of the pods'
	// host-side interface names). ClusterCIDRs still fill the
	// cluster-cidrs set, which no rule then reads.
	PodInterface       string
	PodInterfacePrefix bool
	// MasqueradeBit is the packet mark bit that asks nat-postrouting to
	// masquerade, as kube-proxy's --iptables-masquerade-bit. 0 means the
	// default, 14 (mark 0x4000).
	MasqueradeBit int
}

func (c Config) withDefaults() Config {
	if c.MasqueradeBit == 0 {
		c.MasqueradeBit = defaultMasqueradeBit
	}
	return c
}

// Validate reports a masquerade bit outside 0-31, an invalid CIDR, or a
// pod interface no interface can have.
func (c Config) Validate() error {
	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		return fmt.Errorf("masquerade bit %d: want 0-31", c.MasqueradeBit)
	}
	if err := c.localPods().validate(); err != nil {
		return err
	}
	for _, p := range c.ClusterCIDRs {
		if !p.IsValid() {
			return fmt.Errorf("cluster CIDR %s: invalid prefix", p)
		}
	}
	return nil
}

// mark is the masquerade mark of a defaulted config.
func (c Config) mark() uint32 { return 1 << uint(c.MasqueradeBit) }

// connMark is the conntrack mark bit of service connections
// (connMarkBit), or connMarkBitAlt when the masquerade bit is
// connMarkBit: the two never share a bit.
func (c Config) connMark() uint32 {
	if c.MasqueradeBit == connMarkBit {
		return 1 << connMarkBitAlt
	}
	return 1 << connMarkBit
}

// Conn is the part of *nftables.Conn the writer uses, and a set element
// read that allocates nothing per element (EachSetElement). Every method
// but Flush and the reads (GetSets, GetSetByName, GetSetElements,
// EachSetElement, ListChainsOfTableFamily, GetRules) only queues a
// message; Flush sends the queue as one atomic batch (all or nothing) and
// empties it, also on error. NewLinux's implements it over
// *nftables.Conn; NewFake returns a fake that behaves like the kernel.
type Conn interface {
	// AddTable queues "add table": no error if it exists.
	AddTable(t *nftables.Table) *nftables.Table
	// DelTable queues "delete table" with everything in it; ENOENT at
	// Flush if it does not exist.
	DelTable(t *nftables.Table)
	// AddChain queues "add chain": no error if it exists.
	AddChain(c *nftables.Chain) *nftables.Chain
	// AddRule queues a rule appended to its chain.
	AddRule(r *nftables.Rule) *nftables.Rule
	// AddSet queues "add set" and then its initial elements (vals may be
	// nil). It fails at once only for a non-constant anonymous set.
	AddSet(s *nftables.Set, vals []nftables.SetElement) error
	// SetAddElements queues "add element": an element that already exists
	// with the same value is no error; EBUSY at Flush if its value differs.
	SetAddElements(s *nftables.Set, vals []nftables.SetElement) error
	// SetDeleteElements queues "delete element": ENOENT at Flush for a
	// missing element.
	SetDeleteElements(s *nftables.Set, vals []nftables.SetElement) error
	// Flush sends the queued messages as one batch.
	Flush() error
	// GetSetByName reads a set's definition from the kernel at once (the
	// queue plays no part): ENOENT if the table or the set does not exist.
	GetSetByName(t *nftables.Table, name string) (*nftables.Set, error)
	// GetSetElements reads a set's elements from the kernel at once.
	GetSetElements(s *nftables.Set) ([]nftables.SetElement, error)
	// EachSetElement reads a set's elements from the kernel at once and
	// calls each for every one, as GetSetElements would return them
	// (a verdict map's verdict may be left raw in Val: rawVerdict). The
	// element's slices are valid only during the call. ENOENT if the
	// table or the set does not exist; an error of each ends the read
	// and is returned as it is; ErrDumpInterrupted if the set changed
	// while it was read, after each saw part of it: read again.
	EachSetElement(s *nftables.Set, each func(e nftables.SetElement) error) error
	// GetSets reads the definitions of a table's sets, anonymous ones
	// included: ENOENT if the table does not exist.
	GetSets(t *nftables.Table) ([]*nftables.Set, error)
	// ListChainsOfTableFamily reads the chains of every table of a
	// family (each with its Table).
	ListChainsOfTableFamily(family nftables.TableFamily) ([]*nftables.Chain, error)
	// GetRules reads a chain's rules, with their handles and user data:
	// ENOENT if it does not exist.
	GetRules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error)
	// InsertRule queues a rule inserted at the head of its chain.
	InsertRule(r *nftables.Rule) *nftables.Rule
	// DelRule queues the deletion of the rule r.Handle names: ENOENT at
	// Flush if it does not exist; an error at once for a zero handle.
	DelRule(r *nftables.Rule) error
}

// ErrNeedsResync is returned by Apply when the kernel state is unknown
// (before the first Resync, after a failed call or a Cleanup): the caller
// must Resync the full plan.
var ErrNeedsResync = errors.New("nftables table needs a full resync")

// Writer programs the table. It is not safe for concurrent use (Check
// included).
type Writer struct {
	cfg         Config
	conn        Conn
	table       *nftables.Table
	mirror      *mirror
	needsResync bool
	last        ResyncStats
	cursor      *repairCursor // a Repair in slices in progress
	edits       *ForeignEdits // nil: hand edits wait for a Repair
	// lastRead is when Check last read the table from the kernel and
	// found it whole; now is the clock (time.Now, a test's own).
	lastRead time.Time
	now      func() time.Time
	// rules counts each chain's rules, which depend on cfg alone: Check
	// reads it on every call, and rendering the rules takes as long as
	// the netlink read.
	rules map[string]int
	// forwardErr is the last failure to keep our accept rules in other
	// tables' forward chains ("" after a success): reported once.
	forwardErr string
}

// New returns a writer over c. Nothing is sent until Resync.
func New(cfg Config, c Conn) *Writer {
	w := &Writer{
		cfg:         cfg.withDefaults(),
		conn:        c,
		table:       &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName},
		mirror:      newMirror(),
		needsResync: true,
		now:         time.Now,
	}
	w.rules = map[string]int{}
	for _, r := range ruleSpecs(w.cfg) {
		w.rules[r.chain]++
	}
	return w
}

// NeedsResync reports whether the next call must be Resync: before the
// first successful Resync and after any failed call or Cleanup.
func (w *Writer) NeedsResync() bool { return w.needsResync }

// queueTable queues the whole table with m's elements.
func (w *Writer) queueTable(m *mirror) error {
	c, t := w.conn, w.table
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	chains := map[string]*nftables.Chain{}
	for _, d := range chainDefs {
		chains[d.name] = c.AddChain(w.chain(d))
	}
	sets := newSets(t)
	ids := map[string]uint32{}
	for id, s := range sets {
		if err := c.AddSet(s, nil); err != nil {
			return fmt.Errorf("add set %s: %w", s.Name, err)
		}
		ids[s.Name] = s.ID
		if setID(id).def().base == setClusterCIDRs {
			if err := queueElements(c.SetAddElements, s, cidrElements(w.cfg.ClusterCIDRs, setID(id).family())); err != nil {
				return err
			}
		}
	}
	if err := w.queueDiff(diff{add: m.elements()}, sets); err != nil {
		return err
	}
	return w.queueRules(chains, ids, uint32(len(sets))+1)
}

// queueRules queues every rule, with the anonymous sets they need (IDs
// from nextID). ids maps set names to the IDs their lookups carry.
func (w *Writer) queueRules(chains map[string]*nftables.Chain, ids map[string]uint32, nextID uint32) error {
	c, t := w.conn, w.table
	for _, r := range ruleSpecs(w.cfg) {
		anonID := uint32(0)
		if r.anon != nil {
			anonID, nextID = nextID, nextID+1
			s := &nftables.Set{Table: t, ID: anonID, Name: anonSetName, Anonymous: true, Constant: true, KeyType: r.anon.keyType}
			var vals []nftables.SetElement
			for _, k := range r.anon.keys {
				vals = append(vals, nftables.SetElement{Key: k})
			}
			if err := c.AddSet(s, vals); err != nil {
				return fmt.Errorf("add anonymous set of chain %s: %w", r.chain, err)
			}
		}
		for _, e := range r.exprs {
			if l, ok := e.(*expr.Lookup); ok {
				l.SetID = ids[l.SetName]
				if l.SetName == anonSetName {
					l.SetID = anonID
				}
			}
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: chains[r.chain], Exprs: r.exprs})
	}
	return nil
}

func (w *Writer) chain(d chainDef) *nftables.Chain {
	c := &nftables.Chain{Name: d.name, Table: w.table}
	if d.hook != nil {
		accept, prio := nftables.ChainPolicyAccept, d.priority
		c.Type, c.Hooknum, c.Priority, c.Policy = d.typ, d.hook, &prio, &accept
	}
	return c
}

// newSets returns a handle for every set of table, indexed by setID.
func newSets(table *nftables.Table) []*nftables.Set {
	out := make([]*nftables.Set, numSets())
	for i := range out {
		id := setID(i)
		def, fam := id.def(), id.family()
		s := &nftables.Set{
			Table:        table,
			ID:           uint32(i) + 1,
			Name:         id.name(),
			Interval:     def.interval,
			KeyByteOrder: binaryutil.BigEndian,
			Comment:      def.comment,
		}
		if len(def.fields) == 1 {
			s.KeyType = def.fields[0].datatype(fam)
		} else {
			types := make([]nftables.SetDatatype, len(def.fields))
			for j, f := range def.fields {
				types[j] = f.datatype(fam)
			}
			s.KeyType = nftables.MustConcatSetType(types...)
			s.Concatenation = true
		}
		if def.verdictMap {
			s.IsMap, s.DataType = true, nftables.TypeVerdict
		}
		if def.data != nil {
			types := make([]nftables.SetDatatype, len(def.data))
			for j, f := range def.data {
				types[j] = f.datatype(fam)
			}
			s.IsMap, s.DataType = true, nftables.MustConcatSetType(types...)
		}
		out[i] = s
	}
	return out
}

// Apply updates the elements of the changed services only: each
// ServicePlan is a service's complete new set of virtual servers (none
// when it was deleted). Elements another service still holds stay. All
// changes go in one batch. On error the next call must be Resync.
//
// Apply first checks that the table is still there (Check): if someone
// deleted it, Apply changes nothing and returns an error wrapping
// ErrNeedsResync. With WatchEdits it takes the foreign edits on every
// call, but reads the kernel at most once per applyCheckEvery.
func (w *Writer) Apply(changes []policy.ServicePlan) error {
	if w.needsResync {
		return ErrNeedsResync
	}
	if err := w.check(true); err != nil {
		return err
	}
	before := map[elemID]elementState{}
	for _, sp := range changes {
		w.mirror.set(sp.Service, contributions(sp.VirtualServers), before)
	}
	d := w.mirror.diffOf(before)
	if len(d.add) == 0 && len(d.del) == 0 {
		return nil
	}
	err := w.queueDiff(d, newSets(w.table))
	if err == nil {
		err = w.conn.Flush()
	}
	if err != nil {
		w.needsResync = true
		w.mirror = newMirror()
		return fmt.Errorf("update table inet %s: %d element adds, %d deletes: %w", TableName, len(d.add), len(d.del), err)
	}
	return nil
}

// probeSet is the set Check reads: every table we write has it.
var probeSet = setServiceIPs + familyV4.suffix

// probeChain is the chain whose rules Check counts: `nft flush table`
// (or flushing that chain) leaves our sets in place but every service
// broken, and a count of one chain's few rules sees it.
const probeChain = chainNATPrerouting

// checkProbeChain counts probeChain's rules; another count than we write
// marks the table for a Resync (ErrNeedsResync).
func (w *Writer) checkProbeChain() error {
	rules, err := w.conn.GetRules(w.table, &nftables.Chain{Name: probeChain, Table: w.table})
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("table inet %s: read rules of chain %s: %w", TableName, probeChain, err)
	}
	if want := w.rules[probeChain]; err != nil || len(rules) != want {
		w.needsResync = true
		w.mirror = newMirror()
		return fmt.Errorf("table inet %s: chain %s has %d rules, want %d: %w", TableName, probeChain, len(rules), want, ErrNeedsResync)
	}
	return nil
}

// WatchEdits makes Check report the edits of our table by other
// processes that f collected (see ForeignEdits).
func (w *Writer) WatchEdits(f *ForeignEdits) { w.edits = f }

// Check verifies cheaply, without changing anything, that our table
// still exists: one netlink request reading one set's definition; with
// WatchEdits, also that no other process changed the table since the
// last Check. When the table (or the set) is gone, or was edited, it
// returns an error wrapping ErrNeedsResync and NeedsResync becomes true;
// any other read error is returned as it is. When a Resync is due
// already it checks nothing and returns nil: the Resync rewrites the
// table anyway.
func (w *Writer) Check() error { return w.check(false) }

// applyCheckEvery is how often, at most, Apply's Check reads the kernel
// when foreign edits are watched (a read by Check counts too). The
// notifications report another process's edit at once; the reads are
// left to notice what they cannot tell from ours (a second process with
// our name, `kube-ipvs-proxy --cleanup`): Apply notices those within
// applyCheckEvery, the probe's Check, which always reads, at its next
// call. Under churn Apply runs many times a second, and each read (a set
// by name, a chain's rules with their expressions decoded, on fresh
// sockets) was a good part of the proxy's CPU.
const applyCheckEvery = time.Second

// check is Check; for Apply (byApply) with foreign edits watched it
// skips the kernel read when the last one was less than applyCheckEvery
// ago.
func (w *Writer) check(byApply bool) error {
	edit, edited := "", false
	if w.edits != nil {
		edit, edited = w.edits.Take()
	}
	if w.needsResync {
		return nil
	}
	if edited {
		w.needsResync = true
		return fmt.Errorf("%s: %w", edit, ErrNeedsResync)
	}
	now := w.now()
	if byApply && w.edits != nil && !w.lastRead.IsZero() && now.Sub(w.lastRead) < applyCheckEvery {
		return nil
	}
	_, err := w.conn.GetSetByName(w.table, probeSet)
	switch {
	case err == nil:
		if err := w.checkProbeChain(); err != nil {
			return err
		}
		w.lastRead = now
		return nil
	case errors.Is(err, syscall.ENOENT):
		w.needsResync = true
		w.mirror = newMirror()
		return fmt.Errorf("table inet %s: set %s missing: %w", TableName, probeSet, ErrNeedsResync)
	default:
		return fmt.Errorf("table inet %s: read set %s: %w", TableName, probeSet, err)
	}
}

// queueDiff queues deletes before adds: the batch is atomic, so the order
// is invisible to traffic, and deleting first lets a map key change its
// verdict and an interval be reshaped without EBUSY or overlap errors.
// Elements are sorted by set, so each set gets few messages.
func (w *Writer) queueDiff(d diff, sets []*nftables.Set) error {
	for _, step := range []struct {
		elems []element
		del   bool
	}{{d.del, true}, {d.add, false}} {
		for start := 0; start < len(step.elems); {
			id := step.elems[start].id.set
			end := start
			var vals []nftables.SetElement
			for ; end < len(step.elems) && step.elems[end].id.set == id; end++ {
				vals = append(vals, toSetElement(step.elems[end], step.del))
			}
			queue := w.conn.SetAddElements
			if step.del {
				queue = w.conn.SetDeleteElements
			}
			if err := queueElements(queue, sets[id], vals); err != nil {
				return err
			}
			start = end
		}
	}
	return nil
}

// queueElements splits vals into messages that fit a netlink attribute.
func queueElements(queue func(*nftables.Set, []nftables.SetElement) error, s *nftables.Set, vals []nftables.SetElement) error {
	for len(vals) > 0 {
		n := min(len(vals), elementsPerMessage)
		if err := queue(s, vals[:n]); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
		vals = vals[n:]
	}
	return nil
}

// toSetElement converts an element; a delete carries no value.
func toSetElement(e element, del bool) nftables.SetElement {
	n := e.id.set.keyLen()
	se := nftables.SetElement{Key: []byte(e.id.key[:n])}
	if len(e.id.key) > n {
		se.KeyEnd = []byte(e.id.key[n:])
	}
	if del {
		return se
	}
	if e.v.data != "" {
		se.Val = []byte(e.v.data)
	}
	switch e.v.verdict {
	case rejectGoto:
		se.VerdictData = &expr.Verdict{Kind: expr.VerdictGoto, Chain: chainRejectPacket}
	case dropVerdict:
		se.VerdictData = &expr.Verdict{Kind: expr.VerdictDrop}
	}
	return se
}

// cidrElements encodes prefixes for an interval (rbtree) set: a start
// element, and an end element flagged IntervalEnd one past the last
// address (none when the range reaches the top of the address space).
func cidrElements(prefixes []netip.Prefix, fam *family) []nftables.SetElement {
	var vals []nftables.SetElement
	for _, r := range mergeRanges(prefixes, fam) {
		vals = append(vals, nftables.SetElement{Key: r.first.AsSlice()})
		if next := r.last.Next(); next.IsValid() {
			vals = append(vals, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
	}
	return vals
}

// Cleanup deletes our table, if it exists, and our accept rules from
// other tables' forward chains; nothing else.
func (w *Writer) Cleanup() error {
	w.conn.AddTable(w.table)
	w.conn.DelTable(w.table)
	err := w.conn.Flush()
	w.needsResync = true
	w.mirror = newMirror()
	if err != nil {
		err = fmt.Errorf("delete table inet %s: %w", TableName, err)
	}
	_, ferr := w.syncForwardAccepts(func(*nftables.Chain) bool { return false })
	if ferr != nil {
		ferr = fmt.Errorf("remove %w: %w", ErrForwardAccepts, ferr)
	}
	return errors.Join(err, ferr)
}
