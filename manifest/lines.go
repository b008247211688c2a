package manifest

import (
	"bytes"
	"encoding/json"

	yamlv3 "go.yaml.in/yaml/v3"
)

// positions tells where the items of a List object are in its file, so
// that each item's messages name its own line, not the List's.
type positions interface {
	// items returns the n items of the object's "items" list, or nil
	// when they cannot be told (the object is then not a List as read).
	items(n int) []itemPosition
}

// itemPosition is one List item's file line, and its own items' positions
// for a List in a List.
type itemPosition struct {
	line int
	pos  positions
}

// jsonPositions are the positions in raw, a JSON object exactly as in its
// file, whose first byte is on file line line.
type jsonPositions struct {
	raw  []byte
	line int
}

func (p jsonPositions) items(n int) []itemPosition {
	dec := json.NewDecoder(bytes.NewReader(p.raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	lc := lineCounter{data: p.raw, line: p.line}
	var out []itemPosition
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key != "items" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil
		}
		out = out[:0] // the last "items" is the one decoded
		for dec.More() {
			var item json.RawMessage
			if dec.Decode(&item) != nil {
				return nil
			}
			start := int(dec.InputOffset()) - len(item)
			line := lc.at(start)
			out = append(out, itemPosition{line: line, pos: jsonPositions{raw: item, line: line}})
		}
		if _, err := dec.Token(); err != nil { // the closing ']'
			return nil
		}
	}
	if len(out) != n {
		return nil
	}
	return out
}

// yamlPositions are the positions in a YAML document: data, whose first
// byte is on file line firstLine, parsed when a List's items are first
// asked for (node).
type yamlPositions struct {
	data      []byte
	firstLine int
	node      *yamlv3.Node
}

func (p yamlPositions) items(n int) []itemPosition {
	node := p.node
	if node == nil {
		var doc yamlv3.Node
		if yamlv3.Unmarshal(p.data, &doc) != nil || len(doc.Content) == 0 {
			return nil
		}
		node = doc.Content[0]
	}
	node = resolveAlias(node)
	if node.Kind != yamlv3.MappingNode {
		return nil
	}
	var seq *yamlv3.Node
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == "items" {
			seq = resolveAlias(node.Content[i+1])
		}
	}
	if seq == nil || seq.Kind != yamlv3.SequenceNode || len(seq.Content) != n {
		return nil
	}
	out := make([]itemPosition, n)
	for i, e := range seq.Content {
		out[i] = itemPosition{line: p.firstLine + e.Line - 1, pos: yamlPositions{data: p.data, firstLine: p.firstLine, node: e}}
	}
	return out
}

// resolveAlias returns the node an alias names, or n.
func resolveAlias(n *yamlv3.Node) *yamlv3.Node {
	for i := 0; n.Kind == yamlv3.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}
