package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// maxListDepth bounds Lists nested in Lists, so that decoding stays linear.
const maxListDepth = 8

// knownKinds maps the kinds this package decodes to their apiVersion.
var knownKinds = map[string]string{
	"Service":       "v1",
	"Node":          "v1",
	"EndpointSlice": "discovery.k8s.io/v1",
}

// slot is one decoded object in load order; dead once replaced by a duplicate.
type slot struct {
	obj    any // *corev1.Service, *discoveryv1.EndpointSlice or *corev1.Node
	source string
	live   bool
}

type objKey struct{ kind, namespace, name string }

// loader accumulates objects and warnings over one or more files.
type loader struct {
	slots    []*slot
	seen     map[objKey]*slot
	warnings []Warning
	objects  int // objects with a kind seen, Lists' items counted, not Lists
}

func newLoader() *loader {
	return &loader{seen: make(map[objKey]*slot)}
}

func (l *loader) warn(source, object, msg string) {
	l.warnings = append(l.warnings, Warning{Source: source, Object: object, Message: msg})
}

// result returns the live objects in load order.
func (l *loader) result() *Objects {
	o := &Objects{sources: map[any]string{}}
	for _, s := range l.slots {
		if !s.live {
			continue
		}
		o.sources[s.obj] = s.source
		switch obj := s.obj.(type) {
		case *corev1.Service:
			o.Services = append(o.Services, obj)
		case *discoveryv1.EndpointSlice:
			o.EndpointSlices = append(o.EndpointSlices, obj)
		case *corev1.Node:
			o.Nodes = append(o.Nodes, obj)
		}
	}
	return o
}

var utf8BOM = []byte("\xef\xbb\xbf")

// loadFile decodes one file's bytes.
// A file holding no object, and no warning already, is warned about: an
// empty plan from it would otherwise look like an answer.
func (l *loader) loadFile(name string, data []byte) error {
	objects, warnings := l.objects, len(l.warnings)
	if err := l.decodeFile(name, data); err != nil {
		return err
	}
	if l.objects == objects && len(l.warnings) == warnings {
		l.warn(name+":1", "", "no Kubernetes object in this file")
	}
	return nil
}

func (l *loader) decodeFile(name string, data []byte) error {
	data = bytes.TrimPrefix(data, utf8BOM)
	if strings.HasSuffix(name, ".json") {
		vals, perr := splitJSON(name, data, 1)
		if perr != nil {
			return perr
		}
		return l.values(name, vals)
	}
	return splitYAML(data, func(d document) error { return l.yamlDoc(name, d) })
}

// yamlDoc decodes one document of a YAML file. A document that looks like
// JSON is read as (possibly concatenated) JSON, falling back to YAML, which
// also accepts flow mappings such as "{a: b}".
func (l *loader) yamlDoc(name string, d document) error {
	if c := d.data[d.contentOff]; c == '{' || c == '[' {
		vals, perr := splitJSON(name, d.data[d.contentOff:], d.line)
		if perr == nil {
			return l.values(name, vals)
		}
		j, err := yaml.YAMLToJSON(d.data)
		if err != nil {
			return perr
		}
		return l.values(name, []jsonValue{{raw: j, line: d.line, pos: yamlPositions{data: d.data, firstLine: d.startLine}}})
	}
	j, err := yaml.YAMLToJSON(d.data)
	if err != nil {
		return yamlError(name, d, err)
	}
	return l.values(name, []jsonValue{{raw: j, line: d.line, pos: yamlPositions{data: d.data, firstLine: d.startLine}}})
}

// values loads top-level JSON values; null ones are empty documents.
func (l *loader) values(name string, vals []jsonValue) error {
	for _, v := range vals {
		raw := bytes.TrimSpace(v.raw)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		if raw[0] != '{' {
			return &ParseError{File: name, Line: v.line, Msg: "document is not an object"}
		}
		pos := v.pos
		if pos == nil {
			pos = jsonPositions{raw: raw, line: v.line}
		}
		l.object(raw, name, v.line, pos, 0)
	}
	return nil
}

// header is what is peeked from an object before decoding it.
type header struct {
	APIVersion json.RawMessage `json:"apiVersion"`
	Kind       json.RawMessage `json:"kind"`
	Metadata   json.RawMessage `json:"metadata"`
	Items      json.RawMessage `json:"items"`
}

// object loads one JSON object found at file name's line; pos tells
// where its items are if it is a List, and depth counts enclosing Lists.
func (l *loader) object(raw []byte, name string, line int, pos positions, depth int) {
	source := name + ":" + strconv.Itoa(line)
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		l.warn(source, "", fmt.Sprintf("cannot read object: %v", err))
		return
	}
	kind, ok := jsonString(h.Kind)
	switch {
	case !ok:
		l.warn(source, "", "kind is not a string; skipped")
		return
	case kind == "":
		l.warn(source, "", "no kind; skipped")
		return
	case strings.HasSuffix(kind, "List") && !isNull(h.Items):
		l.list(kind, h.Items, name, line, pos, depth)
		return
	}
	l.objects++
	wantVersion, known := knownKinds[kind]
	name, namespace := peekMeta(h.Metadata)
	if !known {
		// Other built-in kinds are none of our business.
		if !builtinKinds()[kind] {
			l.warn(source, ident(kind, namespace, name), unknownKindMessage(kind))
		}
		return
	}
	if apiVersion, _ := jsonString(h.APIVersion); apiVersion != wantVersion {
		if apiVersion == "" {
			apiVersion = `""`
		}
		l.warn(source, ident(kind, namespace, name),
			fmt.Sprintf("unsupported apiVersion %s for kind %s; skipped", apiVersion, kind))
		return
	}
	obj, meta, err := decodeTyped(kind, raw)
	if err != nil {
		l.warn(source, ident(kind, namespace, name), decodeErrorMessage(err, h.Metadata)+"; skipped")
		return
	}
	if meta.Name == "" {
		l.warn(source, "", kind+" has no metadata.name; skipped")
		return
	}
	if kind != "Node" && meta.Namespace == "" {
		meta.Namespace = metav1.NamespaceDefault // as kubectl does
	}
	l.add(kind, meta, obj, source)
}

// list loads the items of a List document found at file name's line;
// each item is reported at its own line when pos tells it, else at the
// List's.
func (l *loader) list(kind string, items json.RawMessage, name string, line int, pos positions, depth int) {
	source := name + ":" + strconv.Itoa(line)
	if depth >= maxListDepth {
		l.warn(source, "", kind+" nested too deeply; skipped")
		return
	}
	var raws []json.RawMessage
	if bytes.TrimSpace(items)[0] != '[' || json.Unmarshal(items, &raws) != nil {
		l.warn(source, "", kind+" items is not an array; skipped")
		return
	}
	var where []itemPosition
	if pos != nil {
		where = pos.items(len(raws))
	}
	for i, r := range raws {
		itemLine, itemPos := line, positions(nil)
		if where != nil {
			itemLine, itemPos = where[i].line, where[i].pos
		}
		r = bytes.TrimSpace(r)
		if isNull(r) {
			continue
		}
		if r[0] != '{' {
			l.warn(name+":"+strconv.Itoa(itemLine), "", fmt.Sprintf("%s item %d is not an object; skipped", kind, i))
			continue
		}
		l.object(r, name, itemLine, itemPos, depth+1)
	}
}

// add records a decoded object; a later duplicate replaces an earlier one.
func (l *loader) add(kind string, meta *metav1.ObjectMeta, obj any, source string) {
	key := objKey{kind: kind, name: meta.Name}
	if kind != "Node" {
		key.namespace = meta.Namespace
	}
	if old, ok := l.seen[key]; ok {
		old.live, old.obj = false, nil
		l.warn(source, ident(kind, key.namespace, key.name),
			"duplicate of "+old.source+"; this one wins")
	}
	s := &slot{obj: obj, source: source, live: true}
	l.slots = append(l.slots, s)
	l.seen[key] = s
}

// decodeTyped decodes raw into the typed object for kind.
func decodeTyped(kind string, raw []byte) (any, *metav1.ObjectMeta, error) {
	switch kind {
	case "Service":
		o := &corev1.Service{}
		return o, &o.ObjectMeta, json.Unmarshal(raw, o)
	case "EndpointSlice":
		o := &discoveryv1.EndpointSlice{}
		return o, &o.ObjectMeta, json.Unmarshal(raw, o)
	case "Node":
		o := &corev1.Node{}
		return o, &o.ObjectMeta, json.Unmarshal(raw, o)
	}
	return nil, nil, fmt.Errorf("unknown kind %s", kind)
}

// decodeErrorMessage prefixes a decoding error with the field path it is
// about, when known ("spec.ports.port: json: cannot unmarshal ..."). A
// bad timestamp's error names no field, and the time package's quotes
// the whole value: the metadata's timestamps are tried alone to name the
// field, and the value is left out.
func decodeErrorMessage(err error, metadata json.RawMessage) string {
	for _, field := range []string{"creationTimestamp", "deletionTimestamp"} {
		if badTimestamp(metadata, field) {
			return "metadata." + field + ": want a time such as \"2006-01-02T15:04:05Z\" (RFC 3339) or null"
		}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field + ": " + err.Error()
	}
	return err.Error()
}

// badTimestamp reports whether field of the object metadata does not
// decode as a metav1.Time.
func badTimestamp(metadata json.RawMessage, field string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil || m[field] == nil {
		return false
	}
	var ts metav1.Time
	return json.Unmarshal(m[field], &ts) != nil
}

// peekMeta returns metadata.name and metadata.namespace when they are
// strings, "" otherwise.
func peekMeta(raw json.RawMessage) (name, namespace string) {
	var m struct {
		Name      json.RawMessage `json:"name"`
		Namespace json.RawMessage `json:"namespace"`
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return "", ""
	}
	name, _ = jsonString(m.Name)
	namespace, _ = jsonString(m.Namespace)
	return name, namespace
}

// ident names an object for messages: "Service default/web", "Node node-a",
// or "" when its name is unknown. Namespaced kinds default to "default".
func ident(kind, namespace, name string) string {
	if name == "" {
		return ""
	}
	if kind == "Node" {
		return "Node " + name
	}
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return kind + " " + namespace + "/" + name
}

// jsonString decodes a JSON string; absent or null is "" and ok.
func jsonString(raw json.RawMessage) (s string, ok bool) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return "", true
	}
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func isNull(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
