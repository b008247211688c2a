package markdown

import (
	"errors"
	"fmt"
	"strings"
)

// The marker comments around the generated text in BENCHMARKS.md, each
// alone on its line.
const (
	Begin = "<!-- begin: make bench-plot -->"
	End   = "<!-- end: make bench-plot -->"
)

// ErrMarkers is returned when doc does not hold Begin and then End,
// each once: the place for the table is chosen by hand, once, not
// guessed.
var ErrMarkers = errors.New("BENCHMARKS.md needs the lines " + Begin + " and, after it, " + End + ", each once")

// Block is the text between the markers (without them).
func Block(doc string) (string, error) {
	start, end, err := find(doc)
	if err != nil {
		return "", err
	}
	return doc[start:end], nil
}

// Replace puts content between the markers, in place of what was there;
// every byte before Begin's line and after End's is kept. content gets a
// final newline if it lacks one.
func Replace(doc, content string) (string, error) {
	start, end, err := find(doc)
	if err != nil {
		return "", err
	}
	if content != "" && !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	return doc[:start] + content + doc[end:], nil
}

// find returns where the text between the markers starts (after Begin's
// line) and ends (where End's line starts).
func find(doc string) (start, end int, err error) {
	b, e := markerLines(doc, Begin), markerLines(doc, End)
	switch {
	case len(b) != 1 || len(e) != 1:
		return 0, 0, fmt.Errorf("%w (found %d and %d)", ErrMarkers, len(b), len(e))
	case e[0][0] < b[0][0]:
		return 0, 0, fmt.Errorf("%w (the end comes first)", ErrMarkers)
	}
	return b[0][1], e[0][0], nil
}

// markerLines returns where each line that is exactly marker starts and
// where the next line starts.
func markerLines(doc, marker string) [][2]int {
	var out [][2]int
	off := 0
	for line := range strings.Lines(doc) {
		if strings.TrimSuffix(line, "\n") == marker {
			out = append(out, [2]int{off, off + len(line)})
		}
		off += len(line)
	}
	return out
}
