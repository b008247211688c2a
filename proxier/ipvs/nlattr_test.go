package ipvs

import (
	"bytes"
	"testing"

	"github.com/mdlayher/netlink"
)

// FuzzAttrWalkReadsWhatMdlayherReads: on any bytes, attrWalk yields the
// attributes (type without flags, data) mdlayher/netlink's
// AttributeDecoder yields, and fails where it fails.
func FuzzAttrWalkReadsWhatMdlayherReads(f *testing.F) {
	f.Add(destMessage(f, destAttrs{addr: v4In16("10.244.1.5"), port: port(8080), af: 2, weight: 3}).Data[4:])
	f.Add([]byte{0, 0, 1, 0, 8, 0, 2, 0, 1, 2, 3, 4})  // a zero-length attribute, then one
	f.Add([]byte{5, 0, 0x01, 0x80, 9, 0, 0, 0})        // nested flag, padded
	f.Add([]byte{3, 0, 1, 0})                          // shorter than its header
	f.Add([]byte{8, 0, 1, 0, 1, 2, 3, 4, 12, 0, 2, 0}) // one past the end
	f.Fuzz(func(t *testing.T, b []byte) {
		type attr struct {
			typ  uint16
			data []byte
		}
		var want []attr
		ad, err := netlink.NewAttributeDecoder(b)
		if err == nil {
			for ad.Next() {
				want = append(want, attr{ad.Type(), ad.Bytes()})
			}
			err = ad.Err()
		}
		var got []attr
		aw := walkAttrs(b)
		for aw.next() {
			got = append(got, attr{aw.typ, aw.data})
		}
		if (err != nil) != (aw.err != nil) {
			t.Fatalf("mdlayher: %v; attrWalk: %v", err, aw.err)
		}
		if err != nil {
			return // mdlayher checks the whole body before the first attribute
		}
		if len(got) != len(want) {
			t.Fatalf("attrWalk read %d attributes, mdlayher %d", len(got), len(want))
		}
		for i := range want {
			if got[i].typ != want[i].typ || !bytes.Equal(got[i].data, want[i].data) {
				t.Errorf("attribute %d: attrWalk %d %x, mdlayher %d %x", i, got[i].typ, got[i].data, want[i].typ, want[i].data)
			}
		}
	})
}

// TestAttrWalkNumbersHaveTheirLength: a number of the wrong length is an
// error, and the walk stops there.
func TestAttrWalkNumbersHaveTheirLength(t *testing.T) {
	aw := walkAttrs([]byte{7, 0, 1, 0, 1, 2, 3, 0, 8, 0, 2, 0, 1, 0, 0, 0})
	if !aw.next() {
		t.Fatalf("no first attribute: %v", aw.err)
	}
	if aw.uint32(); aw.err == nil {
		t.Fatal("a three-byte uint32 read without an error")
	}
	if aw.next() {
		t.Error("the walk went on after an error")
	}
}
