package policy

import "testing"

// TestProtocolNumbersAreIANAs: TCP, UDP and SCTP map to IP protocol
// numbers 6, 17 and 132 and back; anything else has no number.
func TestProtocolNumbersAreIANAs(t *testing.T) {
	tests := []struct {
		name   string
		proto  Protocol
		number uint8
		ok     bool
	}{
		{"TCP is 6", ProtocolTCP, 6, true},
		{"UDP is 17", ProtocolUDP, 17, true},
		{"SCTP is 132", ProtocolSCTP, 132, true},
		{"lower case is not a protocol", "tcp", 0, false},
		{"an unknown protocol has no number", "ICMP", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := tc.proto.Number()
			if n != tc.number || ok != tc.ok {
				t.Fatalf("%q.Number() = %d, %v; want %d, %v", tc.proto, n, ok, tc.number, tc.ok)
			}
			if !tc.ok {
				return
			}
			if p, ok := ProtocolOfNumber(n); p != tc.proto || !ok {
				t.Errorf("ProtocolOfNumber(%d) = %q, %v; want %q", n, p, ok, tc.proto)
			}
		})
	}
	if p, ok := ProtocolOfNumber(1); ok {
		t.Errorf("ProtocolOfNumber(1) = %q, want none", p)
	}
}
