package policy

import (
	"strings"
	"testing"
)

// TestCutQuoted: every quoted string over 64 bytes in a message is cut
// as an annotation value is; the rest of the message, shorter quoted
// strings and text that only looks quoted stay as they are.
func TestCutQuoted(t *testing.T) {
	long := strings.Repeat("A", 100)
	cut := `"` + strings.Repeat("A", 64) + `"… (100 bytes)`
	tests := []struct{ name, msg, want string }{
		{"a parser's error quoting the value", `invalid IP: ParseAddr("` + long + `"): unable to parse IP`,
			`invalid IP: ParseAddr(` + cut + `): unable to parse IP`},
		{"two long values and a short one", `"` + long + `" or "x" or "` + long + `"`, cut + ` or "x" or ` + cut},
		{"escapes count as the value's bytes", `got "` + strings.Repeat(`\"`, 70) + `"`, `got "` + strings.Repeat(`\"`, 64) + `"… (70 bytes)`},
		{"an unclosed quote stays", `got "` + long, `got "` + long},
		{"a short message stays", `got "x"`, `got "x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CutQuoted(tc.msg); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
