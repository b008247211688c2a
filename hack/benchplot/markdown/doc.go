// Package markdown owns the text make bench-plot writes into
// BENCHMARKS.md: the table of medians (Section, Table), each cell
// without a value saying why (Cell), the note under it (WaitNote),
// and the splice of that text between the two marker comments (Replace,
// Block), which leaves every byte outside the markers as it was.
//
// It formats what package results selected and decides nothing about
// which results count. It does no I/O, and must not import the main
// module's packages.
package markdown
