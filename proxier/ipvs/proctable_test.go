package ipvs

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// procSample is /proc/net/ip_vs as the kernel writes it: an IPv4 and an
// IPv6 virtual server, one without destinations, and a firewall mark
// service, whose destination belongs to no address-based one.
const procSample = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port Forward Weight ActiveConn InActConn
TCP  0A600001:01BB rr
  -> C0A86401:192B      Masq    1      0          0
  -> C0A86402:192B      Masq    0      3          1
UDP  [fd00:0096:0000:0000:0000:0000:0000:000a]:0035 rr
  -> [fd00:0244:0001:0000:0000:0000:0000:0007]:14E9      Masq    1      0          0
SCTP 0A600002:0050 wrr persistent 10800 FFFFFFFF
FWM  00000001 rr
  -> 0AF40105:1F90      Masq    1      0          0
`

// TestParseDestinationCounts: every address-based virtual server is
// counted with its destinations (0 when it has none); firewall mark
// services and their destinations are not; a malformed line is an error
// naming its line.
func TestParseDestinationCounts(t *testing.T) {
	got := map[Key]int{Key{}: 1} // a map read before: emptied first
	err := parseDestinationCounts(strings.NewReader(procSample), got, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"10.96.0.1:443/TCP": 2, "[fd00:96::a]:53/UDP": 1, "10.96.0.2:80/SCTP": 0}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, n := range got {
		if want[k.String()] != n {
			t.Errorf("%s: %d destinations, want %d", k, n, want[k.String()])
		}
	}
	// Forms the kernel does not print are still read, the slow way.
	for _, good := range []struct{ line, key string }{
		{"UDP  [fd00:96::a]:0035 rr", "[fd00:96::a]:53/UDP"},
		{"TCP  0A600001:50 rr", "10.96.0.1:80/TCP"},
		{"TCP  [fd00:0096:0000:0000:0000:0000:0000:000a]:1F90 rr", "[fd00:96::a]:8080/TCP"},
	} {
		head := strings.Join(strings.SplitN(procSample, "\n", 4)[:3], "\n") + "\n"
		counts := map[Key]int{}
		if err := parseDestinationCounts(strings.NewReader(head+good.line+"\n"), counts, nil); err != nil || len(counts) != 1 {
			t.Errorf("%q: %v, %v", good.line, counts, err)
		}
		for k := range counts {
			if k.String() != good.key {
				t.Errorf("%q read as %s, want %s", good.line, k, good.key)
			}
		}
	}
	for _, bad := range []struct{ line, err string }{
		{"TCP  0A6000:01BB rr", `line 4: "0A6000:01BB": not eight hex digits`},
		{"TCP  0A600001 rr", `line 4: "0A600001": no port`},
		{"UDP  [10.0.0.1]:0035 rr", `line 4: "[10.0.0.1]:0035": not an IPv6 address`},
		{"TCP  0A60000G:01BB rr", `line 4: "0A60000G:01BB": encoding/hex`},
		{"TCP  0A600001:1FFFF rr", `line 4: "0A600001:1FFFF": port`},
		{"garbage", `line 4: "garbage" is neither a virtual server nor a destination`},
	} {
		head := strings.Join(strings.SplitN(procSample, "\n", 4)[:3], "\n") + "\n"
		if err := parseDestinationCounts(strings.NewReader(head+bad.line+"\n"), map[Key]int{}, nil); err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("%q: error %v, want %q", bad.line, err, bad.err)
		}
	}
}

// FuzzParseDestinationCounts: the parser never panics, and a virtual
// server it counts has a valid address.
func FuzzParseDestinationCounts(f *testing.F) {
	f.Add([]byte(procSample))
	f.Add([]byte("a\nb\nc\nTCP  [::1]:0 rr\n  -> x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		counts := map[Key]int{}
		err := parseDestinationCounts(bytes.NewReader(data), counts, nil)
		if err != nil {
			return
		}
		for k, n := range counts {
			if !k.Address.IsValid() || n < 0 {
				t.Fatalf("counted %v: %d", k, n)
			}
		}
	})
}

// BenchmarkParseDestinationCounts reads a table of 12,001 virtual
// servers of 10 destinations each, the size of a 10,000-service node,
// with the map and buffer of the last read reused as the reader reuses
// them.
func BenchmarkParseDestinationCounts(b *testing.B) {
	var table strings.Builder
	table.WriteString("IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\n")
	for i := range 12001 {
		fmt.Fprintf(&table, "TCP  0A60%04X:0050 rr\n", i)
		for j := range 10 {
			fmt.Fprintf(&table, "  -> 0A40%04X:1F90      Masq    1      0          0\n", i*10+j)
		}
	}
	data := []byte(table.String())
	counts, buf := map[Key]int{}, make([]byte, procReadBuffer)
	b.ReportAllocs()
	for b.Loop() {
		if err := parseDestinationCounts(bytes.NewReader(data), counts, buf); err != nil || len(counts) != 12001 {
			b.Fatalf("%d counted: %v", len(counts), err)
		}
	}
}
