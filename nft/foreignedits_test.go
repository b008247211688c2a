package nft

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// note builds an nftables notification as the kernel sends it: nfgenmsg,
// then the object's attributes with its table's name first.
func note(t testing.TB, msgType uint16, family uint8, table string) netlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.String(attrTableName, table)
	ae.String(2, "some-object")
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType)},
		Data:   append([]byte{family, unix.NFNETLINK_V0, 0, 0}, b...),
	}
}

// gen builds the NEWGEN message that ends a transaction committed by
// process proc.
func gen(t testing.TB, pid uint32, proc string) netlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(1, 7) // NFTA_GEN_ID
	id := make([]byte, 4)
	binary.BigEndian.PutUint32(id, pid)
	ae.Bytes(attrGenProcPID, id)
	ae.String(attrGenProcName, proc)
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN)},
		Data:   append([]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}, b...),
	}
}

// TestForeignEditsAreTransactionsOnOurTableByAnotherProcess: a
// transaction counts when one of its changes is to table inet
// kube-ipvs-proxy, whatever the object, and its committer is not us;
// our own transactions, other tables (same name in another family too)
// and other subsystems do not.
func TestForeignEditsAreTransactionsOnOurTableByAnotherProcess(t *testing.T) {
	const self = "kube-proxy"
	for _, tc := range []struct {
		name string
		msgs func(t *testing.T) []netlink.Message
		want string // "" for no edit
	}{
		{"a set flushed by nft", func(t *testing.T) []netlink.Message {
			return []netlink.Message{note(t, unix.NFT_MSG_DELSETELEM, unix.NFPROTO_INET, TableName), gen(t, 4242, "nft")}
		}, `table inet kube-ipvs-proxy changed by "nft" (pid 4242)`},
		{"a rule deleted", func(t *testing.T) []netlink.Message {
			return []netlink.Message{note(t, unix.NFT_MSG_DELRULE, unix.NFPROTO_INET, TableName), gen(t, 1, "nft")}
		}, `changed by "nft"`},
		{"the table deleted", func(t *testing.T) []netlink.Message {
			return []netlink.Message{note(t, unix.NFT_MSG_DELTABLE, unix.NFPROTO_INET, TableName), gen(t, 1, "iptables-nft")}
		}, `changed by "iptables-nft"`},
		{"an element added among others' changes", func(t *testing.T) []netlink.Message {
			return []netlink.Message{
				note(t, unix.NFT_MSG_NEWRULE, unix.NFPROTO_IPV4, "nat"),
				note(t, unix.NFT_MSG_NEWSETELEM, unix.NFPROTO_INET, TableName),
				gen(t, 1, "nft"),
			}
		}, `changed by "nft"`},
		{"our own transaction", func(t *testing.T) []netlink.Message {
			return []netlink.Message{note(t, unix.NFT_MSG_NEWSETELEM, unix.NFPROTO_INET, TableName), gen(t, 99, self)}
		}, ""},
		{"another table", func(t *testing.T) []netlink.Message {
			return []netlink.Message{note(t, unix.NFT_MSG_DELSETELEM, unix.NFPROTO_INET, "calico"), gen(t, 1, "nft")}
		}, ""},
		{"our table's name in the ip family", func(t *testing.T) []netlink.Message {
			return []netlink.Message{note(t, unix.NFT_MSG_DELRULE, unix.NFPROTO_IPV4, TableName), gen(t, 1, "nft")}
		}, ""},
		{"ours, then another's on another table", func(t *testing.T) []netlink.Message {
			return []netlink.Message{
				note(t, unix.NFT_MSG_NEWSETELEM, unix.NFPROTO_INET, TableName), gen(t, 99, self),
				note(t, unix.NFT_MSG_DELRULE, unix.NFPROTO_IPV4, "filter"), gen(t, 1, "nft"),
			}
		}, ""},
		{"another subsystem", func(t *testing.T) []netlink.Message {
			m := note(t, unix.NFT_MSG_DELRULE, unix.NFPROTO_INET, TableName)
			m.Header.Type = netlink.HeaderType(unix.NFNL_SUBSYS_IPSET<<8 | 1)
			return []netlink.Message{m, gen(t, 1, "ipset")}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewForeignEdits(TableName, self)
			for _, m := range tc.msgs(t) {
				if err := f.Observe(m); err != nil {
					t.Fatalf("Observe: %v", err)
				}
			}
			got, ok := f.Take()
			switch {
			case tc.want == "" && ok:
				t.Errorf("Take = %q; want no edit", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("Take = %q, %v; want it to name %q", got, ok, tc.want)
			}
			if again, ok := f.Take(); ok {
				t.Errorf("second Take = %q; want the edit taken once", again)
			}
		})
	}
}

// TestLostNotificationsCountAsAnEdit: when the socket overflowed, an edit
// may have been missed, so the next Check resyncs.
func TestLostNotificationsCountAsAnEdit(t *testing.T) {
	f := NewForeignEdits(TableName, "kube-proxy")
	f.Lost(unix.ENOBUFS)
	if got, ok := f.Take(); !ok || !strings.Contains(got, "lost") {
		t.Errorf("Take = %q, %v after lost notifications; want an edit saying so", got, ok)
	}
}

// TestDecodeNotificationRefusesMalformedMessages: a message too short for
// its header or with a broken attribute is an error, not a guess.
func TestDecodeNotificationRefusesMalformedMessages(t *testing.T) {
	typ := netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_DELRULE)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"no nfgenmsg", []byte{1, 0}},
		{"attribute longer than the message", []byte{1, 0, 0, 0, 40, 0, 1, 0, 'k'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeNotification(netlink.Message{Header: netlink.Header{Type: typ}, Data: tc.data})
			if err == nil {
				t.Fatal("decoded; want an error")
			}
		})
	}
	_, err := decodeNotification(netlink.Message{Header: netlink.Header{Type: typ}, Data: []byte{1}})
	if !errors.Is(err, errShort) {
		t.Errorf("short message: %v; want errShort", err)
	}
}

// TestCheckReportsAForeignEditOnce: with WatchEdits, Check turns a
// collected edit into ErrNeedsResync (the loop then resyncs), once.
func TestCheckReportsAForeignEditOnce(t *testing.T) {
	fk := NewFake()
	w := New(Config{}, fk)
	if err := w.Resync(fullPlan()); err != nil {
		t.Fatal(err)
	}
	f := NewForeignEdits(TableName, "kube-proxy")
	w.WatchEdits(f)
	if err := w.Check(); err != nil {
		t.Fatalf("Check before any edit: %v", err)
	}
	if err := f.Observe(note(t, unix.NFT_MSG_DELSETELEM, unix.NFPROTO_INET, TableName)); err != nil {
		t.Fatal(err)
	}
	if err := f.Observe(gen(t, 1, "nft")); err != nil {
		t.Fatal(err)
	}
	if err := w.Check(); !errors.Is(err, ErrNeedsResync) || !w.NeedsResync() {
		t.Fatalf("Check after a foreign edit: %v, NeedsResync %v; want ErrNeedsResync", err, w.NeedsResync())
	}
	if err := w.Resync(fullPlan()); err != nil {
		t.Fatal(err)
	}
	if err := w.Check(); err != nil {
		t.Errorf("Check after the Resync: %v; want the edit reported once", err)
	}
}

// FuzzDecodeNotification: no input panics the decoder.
func FuzzDecodeNotification(f *testing.F) {
	f.Add(uint16(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_DELSETELEM), note(f, unix.NFT_MSG_DELSETELEM, unix.NFPROTO_INET, TableName).Data)
	f.Add(uint16(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWGEN), gen(f, 1, "nft").Data)
	f.Add(uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, typ uint16, data []byte) {
		fe := NewForeignEdits(TableName, "kube-proxy")
		_ = fe.Observe(netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(typ)}, Data: data})
	})
}
