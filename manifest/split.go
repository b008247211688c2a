package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// document is one YAML document of a file.
type document struct {
	data       []byte // the document's bytes, from its first line
	startLine  int    // file line of data[0]
	line       int    // file line of the first content line (not blank, not a comment)
	contentOff int    // offset in data of the first content byte
}

// lineKind classifies a line for document splitting.
type lineKind int

const (
	lineContent   lineKind = iota
	lineBlank              // empty, whitespace or a comment
	lineDirective          // "%YAML 1.1" etc.
	lineSeparator          // "---" or "..." alone, optionally with a comment
	lineDocStart           // "--- content": starts a document that includes the line
)

func classifyLine(line []byte) lineKind {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if bytes.HasPrefix(line, []byte("---")) || bytes.HasPrefix(line, []byte("...")) {
		rest := line[3:]
		if len(rest) == 0 {
			return lineSeparator
		}
		if rest[0] == ' ' || rest[0] == '\t' {
			rest = bytes.TrimLeft(rest, " \t")
			if len(rest) == 0 || rest[0] == '#' {
				return lineSeparator
			}
			if line[0] == '-' {
				return lineDocStart
			}
		}
		return lineContent
	}
	trimmed := bytes.TrimLeft(line, " \t")
	switch {
	case len(trimmed) == 0 || trimmed[0] == '#':
		return lineBlank
	case line[0] == '%':
		return lineDirective
	}
	return lineContent
}

// splitYAML calls fn for each document of data that has content, in order.
// Documents are separated by "---" lines (optionally followed by blanks and
// a comment) and ended by "..." lines. Directive lines before a "---" belong
// to the document that the "---" starts.
func splitYAML(data []byte, fn func(document) error) error {
	var (
		start, startLine = 0, 1 // current document
		content, contOff = 0, 0 // first content line and its offset; 0 if none
		directives       bool
		lineNo           int
	)
	flush := func(end int) error {
		if content == 0 {
			return nil
		}
		return fn(document{data: data[start:end], startLine: startLine, line: content, contentOff: contOff - start})
	}
	for pos := 0; pos < len(data); {
		lineNo++
		end := len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			end = pos + i
		}
		next := min(end+1, len(data))
		switch kind := classifyLine(data[pos:end]); {
		case kind == lineBlank:
		case kind == lineDirective && content == 0:
			directives = true
		case kind == lineSeparator && directives && content == 0:
			directives = false // "%YAML 1.1\n---": one document
		case kind == lineSeparator || kind == lineDocStart:
			if err := flush(pos); err != nil {
				return err
			}
			start, startLine, content, directives = next, lineNo+1, 0, false
			if kind == lineDocStart {
				start, startLine, content, contOff = pos, lineNo, lineNo, pos
			}
		case content == 0:
			content = lineNo
			contOff = pos + len(data[pos:end]) - len(bytes.TrimLeft(data[pos:end], " \t"))
		}
		pos = next
	}
	return flush(len(data))
}

// yamlLineRE matches the line prefix of go-yaml errors, both syntax errors
// ("yaml: line 7: ...") and type errors ("yaml: unmarshal errors:\n  line 7: ...").
var yamlLineRE = regexp.MustCompile(`^yaml: (?:unmarshal errors:\n\s*)?line (\d+): `)

// yamlError turns a YAMLToJSON error for d into a ParseError with a file line.
func yamlError(name string, d document, err error) *ParseError {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	line := d.line
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil && n > 0 && n < 1<<30 {
			line = d.startLine - 1 + n
		}
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return &ParseError{File: name, Line: line, Msg: msg}
}

// jsonValue is one top-level JSON value and the file line where it starts.
type jsonValue struct {
	raw  []byte
	line int
	pos  positions // where its List items are; nil: raw is as in the file
}

// lineCounter maps byte offsets of data to file lines, in amortised linear
// time for increasing offsets.
type lineCounter struct {
	data      []byte
	pos, line int
}

func (c *lineCounter) at(off int) int {
	off = max(0, min(off, len(c.data)))
	if off >= c.pos {
		c.line += bytes.Count(c.data[c.pos:off], []byte("\n"))
	} else {
		c.line -= bytes.Count(c.data[off:c.pos], []byte("\n"))
	}
	c.pos = off
	return c.line
}

// splitJSON decodes the concatenated JSON values of data, whose first byte is
// on file line firstLine.
func splitJSON(name string, data []byte, firstLine int) ([]jsonValue, *ParseError) {
	dec := json.NewDecoder(bytes.NewReader(data))
	lc := lineCounter{data: data, line: firstLine}
	var vals []jsonValue
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return vals, nil
		}
		if err != nil {
			var se *json.SyntaxError
			line := lc.line
			switch {
			case errors.As(err, &se):
				line = lc.at(int(se.Offset) - 1)
			case errors.Is(err, io.ErrUnexpectedEOF):
				line = lc.at(len(bytes.TrimRight(data, " \t\r\n")))
			}
			return nil, &ParseError{File: name, Line: line, Msg: err.Error()}
		}
		start := int(dec.InputOffset()) - len(raw)
		vals = append(vals, jsonValue{raw: raw, line: lc.at(start)})
	}
}
