package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxQuoted bounds how much of a value a message quotes: an annotation
// value can be 256 KiB, an address field as long, and a warning becomes
// a log line and an Event on every node.
const maxQuoted = 64

// quoted quotes v, cut to maxQuoted bytes (on a rune boundary) with its
// full length when longer: `"abc…"… (300 bytes)`.
func quoted(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return strconv.Quote(v[:cut]) + fmt.Sprintf("… (%d bytes)", len(v))
}

// CutQuoted returns msg with every Go-quoted string in it longer than
// maxQuoted bytes cut as quoted cuts it: for messages that quote a value
// through another error's text (netip's `ParseAddr("...")`), which
// quoted cannot reach.
func CutQuoted(msg string) string {
	if len(msg) <= maxQuoted {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		if msg[i] != '"' {
			b.WriteByte(msg[i])
			i++
			continue
		}
		q, err := strconv.QuotedPrefix(msg[i:])
		if err != nil {
			b.WriteByte(msg[i])
			i++
			continue
		}
		if s, err := strconv.Unquote(q); err == nil && len(s) > maxQuoted {
			b.WriteString(quoted(s))
		} else {
			b.WriteString(q)
		}
		i += len(q)
	}
	return b.String()
}
