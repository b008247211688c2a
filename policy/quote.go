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

// Quoted quotes v, cut to maxQuoted bytes (on a rune boundary) with its
// full length when longer: `"abc…"… (300 bytes)`.
func Quoted(v string) string {
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
// maxQuoted bytes cut as Quoted cuts it: for messages that quote a value
// through another error's text (netip's `ParseAddr("...")`), which
// Quoted cannot reach.
func CutQuoted(msg string) string {
	var b strings.Builder // written from the first cut on
	done := 0             // msg[:done] is in b
	for i := 0; i < len(msg); {
		j := strings.IndexByte(msg[i:], '"')
		if j < 0 {
			break
		}
		i += j
		q, err := strconv.QuotedPrefix(msg[i:])
		if err != nil {
			i++
			continue
		}
		if len(q) > maxQuoted+2 {
			if s, err := strconv.Unquote(q); err == nil && len(s) > maxQuoted {
				b.WriteString(msg[done:i])
				b.WriteString(Quoted(s))
				done = i + len(q)
			}
		}
		i += len(q)
	}
	if done == 0 {
		return msg
	}
	b.WriteString(msg[done:])
	return b.String()
}
