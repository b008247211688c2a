package leftovers

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeXtKernel holds one table; replace answers the errors of replaceErrs
// in turn, then writes, and hands back one counter per old entry (entry
// i counted i+1 packets), as the kernel does.
type fakeXtKernel struct {
	blob, info  []byte
	replaceErrs []error
	reads       int
	written     *xtSplice
	counters    []byte
}

func (k *fakeXtKernel) read(bool, string) ([]byte, []byte, error) {
	k.reads++
	return k.blob, k.info, nil
}

func (k *fakeXtKernel) replace(_ bool, _ string, sp xtSplice, oldEntries uint32) ([]byte, error) {
	if len(k.replaceErrs) > 0 {
		err := k.replaceErrs[0]
		k.replaceErrs = k.replaceErrs[1:]
		return nil, err
	}
	k.written = &sp
	old := make([]byte, xtCounterSize*oldEntries)
	for i := range int(oldEntries) {
		binary.NativeEndian.PutUint64(old[xtCounterSize*i:], uint64(i+1))
	}
	return old, nil
}

func (k *fakeXtKernel) addCounters(_ bool, _ string, c []byte) error { k.counters = c; return nil }

// capturedFilter is the captured ip filter table; with forwardDrop, its
// FORWARD policy made DROP.
func capturedFilter(t *testing.T, forwardDrop bool) (blob, info []byte) {
	in, blob := readXtCapture(t, "ip-filter-before")
	raw := xtInfoBytes(in)
	if forwardDrop {
		blob = slices.Clone(blob)
		off := int(in.Underflow[xtHookForward])
		tOff := int(binary.NativeEndian.Uint16(blob[off+iptEntry.targetOffset:]))
		drop := int32(kernelDrop)
		binary.NativeEndian.PutUint32(blob[off+tOff+xtTargetDataOff:], uint32(drop))
	}
	return blob, raw
}

// TestRemoveLegacyTableRetriesAChangedTableAndCarriesCountersOver: a
// table the kernel says changed between the read and the write (EAGAIN)
// is read and spliced again, a few times at most; any other refusal is
// an error with nothing reported removed; once written, each entry that
// stayed gets the counters it had; KUBE-FORWARD stays where FORWARD's
// policy is DROP.
func TestRemoveLegacyTableRetriesAChangedTableAndCarriesCountersOver(t *testing.T) {
	for _, tc := range []struct {
		name        string
		forwardDrop bool
		errs        []error
		wantReads   int
		wantErr     string
		wantForward bool // KUBE-FORWARD among the chains cut
	}{
		{"written at once", false, nil, 1, "", true},
		{"changed once: read again, then written", false, []error{unix.EAGAIN}, 2, "", true},
		{"kept changing: an error after the tries", false, slices.Repeat([]error{unix.EAGAIN}, xtReplaceTries), xtReplaceTries, "kept changing", false},
		{"refused by the kernel: an error, nothing removed", false, []error{unix.EINVAL}, 1, "IPT_SO_SET_REPLACE: invalid argument", false},
		{"FORWARD drops: KUBE-FORWARD stays", true, nil, 1, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blob, info := capturedFilter(t, tc.forwardDrop)
			k := &fakeXtKernel{blob: blob, info: info, replaceErrs: tc.errs}
			r, err := removeLegacyTable(k, false, "filter")
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("removeLegacyTable err = %v; want %q", err, tc.wantErr)
			}
			if k.reads != tc.wantReads {
				t.Errorf("%d reads; want %d", k.reads, tc.wantReads)
			}
			if r.Table != "ip filter" || r.KeptForward != tc.forwardDrop {
				t.Errorf("removal %+v; want table ip filter, KeptForward %v", r, tc.forwardDrop)
			}
			if tc.wantErr != "" {
				if len(r.Chains) > 0 || k.counters != nil {
					t.Errorf("reported %v removed, counters %v, after an error", r.Chains, k.counters != nil)
				}
				return
			}
			if slices.Contains(r.Chains, "KUBE-FORWARD") != tc.wantForward || len(r.Chains) < 6 {
				t.Errorf("chains cut %v; KUBE-FORWARD among them: want %v", r.Chains, tc.wantForward)
			}
			if len(k.counters) != xtCounterSize*len(k.written.Kept) {
				t.Fatalf("%d bytes of counters for %d entries", len(k.counters), len(k.written.Kept))
			}
			for i, old := range k.written.Kept {
				if got := binary.NativeEndian.Uint64(k.counters[xtCounterSize*i:]); got != uint64(old+1) {
					t.Fatalf("new entry %d (old %d) gets the counters of old entry %d", i, old, got-1)
				}
			}
		})
	}
}

// TestRemoveLegacyTableLeavesATableItDoesNotUnderstand: a blob the
// splicer refuses is never written.
func TestRemoveLegacyTableLeavesATableItDoesNotUnderstand(t *testing.T) {
	blob, info := capturedFilter(t, false)
	k := &fakeXtKernel{blob: blob[:len(blob)-8], info: info}
	if _, err := removeLegacyTable(k, false, "filter"); err == nil || !strings.Contains(err.Error(), "not changed") || k.written != nil {
		t.Errorf("removeLegacyTable = %v, written %v; want not changed", err, k.written != nil)
	}
}
