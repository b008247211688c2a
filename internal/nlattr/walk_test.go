package nlattr

import (
	"bytes"
	"testing"

	"github.com/mdlayher/netlink"
)

// FuzzWalkReadsWhatMdlayherReads: on any bytes, Walk yields the
// attributes (type without flags, data) mdlayher/netlink's
// AttributeDecoder yields, and fails where it fails.
func FuzzWalkReadsWhatMdlayherReads(f *testing.F) {
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(1, []byte{10, 244, 1, 5})
	ae.Uint16(2, 8080)
	ae.Nested(3, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(1, 3)
		return nil
	})
	seed, err := ae.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
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
		w := New(b)
		for w.Next() {
			got = append(got, attr{w.Type, w.Data})
		}
		if (err != nil) != (w.Err != nil) {
			t.Fatalf("mdlayher: %v; Walk: %v", err, w.Err)
		}
		if err != nil {
			return // mdlayher checks the whole body before the first attribute
		}
		if len(got) != len(want) {
			t.Fatalf("Walk read %d attributes, mdlayher %d", len(got), len(want))
		}
		for i := range want {
			if got[i].typ != want[i].typ || !bytes.Equal(got[i].data, want[i].data) {
				t.Errorf("attribute %d: Walk %d %x, mdlayher %d %x", i, got[i].typ, got[i].data, want[i].typ, want[i].data)
			}
		}
	})
}

// TestNumbersHaveTheirLength: a number of the wrong length is an error,
// and the walk stops there.
func TestNumbersHaveTheirLength(t *testing.T) {
	w := New([]byte{7, 0, 1, 0, 1, 2, 3, 0, 8, 0, 2, 0, 1, 0, 0, 0})
	if !w.Next() {
		t.Fatalf("no first attribute: %v", w.Err)
	}
	if w.Uint32(); w.Err == nil {
		t.Fatal("a three-byte uint32 read without an error")
	}
	if w.Next() {
		t.Error("the walk went on after an error")
	}
}
