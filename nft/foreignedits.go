package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ForeignEdits collects the transactions that changed our table and were
// made by another process, as the kernel announces them on the nftables
// notification group (NFNLGRP_NFTABLES, what "nft monitor" reads): a
// flushed set, a deleted element or rule, a deleted table. Writer.Check
// takes them, so a hand edit is repaired by the next sync instead of the
// periodic repair, whatever part of the table it touched.
//
// A transaction is ours when the process that committed it has our
// command name (the kernel's NFTA_GEN_PROC_NAME). The process ID the
// kernel gives is the thread's, in the initial PID namespace, so it cannot
// be compared with ours from inside a container; the socket's port ID
// cannot either, since google/nftables opens a socket per request. So
// another process with our name (a second kube-ipvs-proxy) is taken for
// us: its edits wait for the periodic repair, as before.
//
// Hand-written on github.com/mdlayher/netlink rather than google/nftables'
// Monitor: that one decodes every element of every transaction (ours
// included, tens of thousands in a rebuild) and drops the table name of
// element notifications, which is what tells our table's from another's.
// Here only each message's header and first attribute are read.
type ForeignEdits struct {
	table string // our table's name; its family is inet
	self  string // our command name

	mu      sync.Mutex
	touched bool   // the transaction being read changed our table
	pending string // the first foreign edit not yet taken, described
}

// NewForeignEdits returns a collector for edits of table (family inet)
// by a process whose command name is not self.
func NewForeignEdits(table, self string) *ForeignEdits {
	return &ForeignEdits{table: table, self: self}
}

// Take returns the first foreign edit seen since the last Take, and
// forgets it.
func (f *ForeignEdits) Take() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pending
	f.pending = ""
	return p, p != ""
}

// Lost records that notifications were lost (the socket's buffer
// overflowed): an edit may have been missed, so it counts as one.
func (f *ForeignEdits) Lost(err error) {
	f.note(fmt.Sprintf("nftables notifications lost (%v)", err))
}

func (f *ForeignEdits) note(desc string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == "" {
		f.pending = desc
	}
}

// Observe reads one notification. The kernel sends a transaction's
// changes and then its NEWGEN message, which names the process that
// committed it. A message that does not decode is an error; the caller
// counts it as lost.
func (f *ForeignEdits) Observe(m netlink.Message) error {
	n, err := decodeNotification(m)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case n.gen:
		if f.touched && n.proc != f.self && f.pending == "" {
			f.pending = fmt.Sprintf("table inet %s changed by %q (pid %d)", f.table, n.proc, n.pid)
		}
		f.touched = false
	case n.family == unix.NFPROTO_INET && n.table == f.table:
		f.touched = true
	}
	return nil
}

// notification is what ForeignEdits needs of one nftables notification:
// for a change, the family and name of the table it changed; for the
// NEWGEN message that ends a transaction, the committing process.
type notification struct {
	gen    bool
	family uint8
	table  string
	pid    uint32
	proc   string
}

// Attribute numbers from linux/netfilter/nf_tables.h. Every object's
// message carries its table's name as attribute 1 (NFTA_TABLE_NAME,
// NFTA_CHAIN_TABLE, NFTA_RULE_TABLE, NFTA_SET_TABLE,
// NFTA_SET_ELEM_LIST_TABLE, NFTA_OBJ_TABLE, NFTA_FLOWTABLE_TABLE).
const (
	attrTableName    = 1
	attrGenProcPID   = 2 // NFTA_GEN_PROC_PID
	attrGenProcName  = 3 // NFTA_GEN_PROC_NAME
	nfgenmsgLen      = 4 // struct nfgenmsg: family, version, resource id
	subsysNFTables   = unix.NFNL_SUBSYS_NFTABLES
	maxTableNameSize = 256 // NFT_NAME_MAXLEN
)

var errShort = errors.New("message shorter than its nfgenmsg header")

// decodeNotification decodes one message of the nftables notification
// group. Messages of other subsystems decode to an empty notification.
func decodeNotification(m netlink.Message) (notification, error) {
	var n notification
	if uint16(m.Header.Type)>>8 != subsysNFTables {
		return n, nil
	}
	if len(m.Data) < nfgenmsgLen {
		return n, fmt.Errorf("nftables notification type %#x: %w", uint16(m.Header.Type), errShort)
	}
	n.family = m.Data[0]
	ad, err := netlink.NewAttributeDecoder(m.Data[nfgenmsgLen:])
	if err != nil {
		return n, fmt.Errorf("nftables notification type %#x: %w", uint16(m.Header.Type), err)
	}
	n.gen = uint16(m.Header.Type)&0xff == unix.NFT_MSG_NEWGEN
	for ad.Next() {
		switch t := ad.Type(); {
		case n.gen && t == attrGenProcPID && len(ad.Bytes()) == 4:
			n.pid = binary.BigEndian.Uint32(ad.Bytes())
		case n.gen && t == attrGenProcName:
			n.proc = ad.String()
		case !n.gen && t == attrTableName && len(ad.Bytes()) <= maxTableNameSize:
			n.table = ad.String()
		}
	}
	if err := ad.Err(); err != nil {
		return n, fmt.Errorf("nftables notification type %#x: %w", uint16(m.Header.Type), err)
	}
	return n, nil
}
