package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	sigsjson "sigs.k8s.io/json"
)

// maxStrictErrors is how many unknown fields one sigs.k8s.io/json
// UnmarshalStrict call reports at most (its internal limit).
const maxStrictErrors = 100

// decode decodes obj with UnmarshalStrict, as kube-proxy's codec does,
// and returns every bad value ("path: what") and every unknown field's
// path, each in key order (keys sorted, list elements by index, as
// json.Marshal writes obj). cfg is meaningful only when bad is empty.
// obj is changed.
//
// UnmarshalStrict alone returns only the first bad value, no unknown
// fields beside one, and at most maxStrictErrors unknown fields. So decode
// locates the first bad value, removes it from obj and decodes again,
// until decoding succeeds; then moreUnknown lists the unknown fields past
// the limit. Each round decodes the whole document, so the time grows as
// the number of bad values times the document's size: 100 bad values take
// milliseconds, 1000 some seconds.
//
// A null that the field refuses (metav1.Duration's UnmarshalJSON does)
// is removed as unset, not reported: null means unset. Other nulls are
// decoded as they are, as kube-proxy does: nothing for a field, the zero
// value for a map value (featureGates: {A: null} is A=false).
func decode(obj map[string]any) (cfg KubeProxyConfiguration, unknown []string, bad []error) {
	// Each round deletes a member or sets a list element that is not null
	// to null: a value is set to null at most once and deleted at most
	// once, so 2 rounds a value suffice.
	var from []step // the last bad value's path
	for range 2*size(obj) + 1 {
		cfg = KubeProxyConfiguration{}
		listed, err := unmarshalStrict(obj, &cfg)
		if err == nil {
			return cfg, moreUnknown(obj, listed), bad
		}
		path, e := locate(nil, obj, err, from)
		from = path
		switch parent := parentOf(obj, path).(type) {
		case map[string]any:
			key := path[len(path)-1].(string)
			if parent[key] != nil {
				bad = append(bad, e)
			}
			delete(parent, key)
		case []any:
			// A null element keeps the later elements' indexes. Every
			// list of KubeProxyConfiguration holds strings or objects,
			// which take null; should one refuse it, the search ends.
			i := path[len(path)-1].(int)
			bad = append(bad, e)
			if parent[i] == nil {
				return cfg, nil, bad
			}
			parent[i] = nil
		default: // the document itself: nothing to remove
			return cfg, nil, append(bad, e)
		}
	}
	return cfg, nil, append(bad, errors.New("too many bad values")) // not reached
}

// moreUnknown returns unknown, the unknown fields one decoding of obj
// listed, and, if that list is full, the rest: the listed fields are
// deleted from obj and obj decoded again, while the list is full. Each
// round deletes at least one member, so it ends.
func moreUnknown(obj map[string]any, unknown []string) []string {
	for batch := unknown; len(batch) == maxStrictErrors; {
		for _, path := range batch {
			if !deleteField(obj, path) {
				return unknown // not reached: the decoder lists fields of obj
			}
		}
		var err error
		if batch, err = unmarshalStrict(obj, &KubeProxyConfiguration{}); err != nil {
			return unknown // not reached: deleting fields makes no bad value
		}
		unknown = append(unknown, batch...)
	}
	return unknown
}

// deleteField deletes from v the field the decoder names path
// ("ipvs.foo", "logging.vmodule[1].level", relative to v), and reports
// whether it found it. A key may hold "." or "[" itself, so each key that
// starts path (and ends before a "." or "[" of it) is tried, the longest
// first: a field name has neither.
func deleteField(v any, path string) bool {
	switch c := v.(type) {
	case map[string]any:
		for end := len(path); end > 0; end-- {
			k, rest := path[:end], path[end:]
			if _, ok := c[k]; !ok || (rest != "" && rest[0] != '.' && rest[0] != '[') {
				continue
			}
			if rest == "" {
				delete(c, k)
				return true
			}
			if deleteBelow(c[k], rest) {
				return true
			}
		}
	case []any:
		index, r, ok := strings.Cut(path, "]")
		i, err := strconv.Atoi(strings.TrimPrefix(index, "["))
		return ok && strings.HasPrefix(index, "[") && err == nil && i >= 0 && i < len(c) && deleteBelow(c[i], r)
	}
	return false
}

// deleteBelow deletes the field at rest (".b", "[1].b") below v.
func deleteBelow(v any, rest string) bool {
	switch {
	case strings.HasPrefix(rest, "."):
		return deleteField(v, rest[1:])
	case strings.HasPrefix(rest, "["):
		return deleteField(v, rest)
	}
	return false
}

// size is the number of values in v, v included.
func size(v any) int {
	n := 1
	switch c := v.(type) {
	case map[string]any:
		for _, e := range c {
			n += size(e)
		}
	case []any:
		for _, e := range c {
			n += size(e)
		}
	}
	return n
}

// parentOf returns the object or list in doc that holds the value at
// path, or nil when path is empty.
func parentOf(doc any, path []step) any {
	if len(path) == 0 {
		return nil
	}
	for _, s := range path[:len(path)-1] {
		switch s := s.(type) {
		case string:
			doc = doc.(map[string]any)[s]
		case int:
			doc = doc.([]any)[s]
		}
	}
	return doc
}

// step is one step of a path: a string key or an int index.
type step any

// unmarshalStrict re-encodes v and decodes it into dst with
// sigs.k8s.io/json's UnmarshalStrict, as kube-proxy's codec does, and
// returns the unknown fields' paths as the decoder writes them
// ("ipvs.foo", "logging.vmodule[1].level").
func unmarshalStrict(v any, dst *KubeProxyConfiguration) ([]string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("re-encode: %w", err)
	}
	strict, err := sigsjson.UnmarshalStrict(data, dst, sigsjson.DisallowUnknownFields)
	var unknown []string
	for _, e := range strict {
		if fe, ok := e.(sigsjson.FieldError); ok {
			unknown = append(unknown, fe.FieldPath())
		}
	}
	return unknown, err
}

// decodeAt returns the error of decoding the document holding only v at
// path. A list on the path holds v alone, as its element 0: all elements
// of a list decode alike.
func decodeAt(path []step, v any) error {
	for i := len(path) - 1; i >= 0; i-- {
		switch s := path[i].(type) {
		case string:
			v = map[string]any{s: v}
		case int:
			v = []any{v}
		}
	}
	_, err := unmarshalStrict(v, &KubeProxyConfiguration{})
	return err
}

// locate finds the bad value behind err, the error UnmarshalStrict
// returned for v at path, and returns its path and its error "path:
// what" (no path when it is the document itself). The decoder's own type
// errors name the struct field but not a map key or list index below it,
// and an error from a field's UnmarshalJSON (a duration, a quantity)
// names nothing; so, if the field takes v's kind of container, v's
// members are decoded one at a time, in key order, down to the first that
// fails alone.
//
// from is the last bad value's path, or nil. The members before it
// decoded alone in the last round and are unchanged, so the search starts
// at from's member (wrapping around, to be sure): over all of decode's
// rounds, a long list or map's members are decoded alone about once each,
// not once each a round.
func locate(path []step, v any, err error, from []step) ([]step, error) {
	var members []step
	var empty any
	switch c := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(c)) {
			members = append(members, k)
		}
		empty = map[string]any{}
	case []any:
		for i := range c {
			members = append(members, i)
		}
		empty = []any{}
	}
	if len(path) > 0 && empty != nil {
		if decodeAt(path, empty) != nil {
			members = nil // the field takes no such container: v is the bad value
		}
	}
	if d := len(path); len(from) > d {
		if i := slices.IndexFunc(members, func(m step) bool { return !stepBefore(m, from[d]) }); i > 0 {
			members = slices.Concat(members[i:], members[:i])
		}
	}
	for _, m := range members {
		sub := append(slices.Clip(path), m)
		var val any
		if i, ok := m.(int); ok {
			val = v.([]any)[i]
		} else {
			val = v.(map[string]any)[m.(string)]
		}
		if subErr := decodeAt(sub, val); subErr != nil {
			if len(from) <= len(path) || from[len(path)] != m {
				from = nil // past from's member: search it all
			}
			return locate(sub, val, subErr, from)
		}
	}
	if len(path) == 0 {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return path, fmt.Errorf("%s: %s", pathString(path), describe(path, v, err))
}

// describe is the bad value v's error: "want T, got V" for a type error
// (objects and lists named as such, and a duration named when the field
// takes "30s" but not "x"), else the decoder's own words.
func describe(path []step, v any, err error) string {
	// Not errors.As: a type error wrapped by a field's UnmarshalJSON (as
	// flushFrequency's "invalid duration ...") is told in its own words.
	te, ok := err.(*json.UnmarshalTypeError)
	if !ok || te.Type == nil {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	want := te.Type.Kind().String() // "string", not "v1alpha1.ProxyMode"
	switch k := te.Type.Kind(); {
	case k == reflect.Struct || k == reflect.Map:
		want = "an object"
	case k == reflect.Slice:
		want = "a list"
	case k == reflect.String && isDuration(path):
		want = `a duration such as "30s"`
	}
	got := jsonKind(v)
	if strings.HasPrefix(te.Value, "number ") {
		got = te.Value // out of range: name the number
	}
	return fmt.Sprintf("want %s, got %s", want, got)
}

// isDuration reports whether the field at path reads a duration string:
// it takes "30s" and refuses "x".
func isDuration(path []step) bool {
	return decodeAt(path, "30s") == nil && decodeAt(path, "x") != nil
}

// stepBefore reports whether step a comes before b: a key before a key,
// an index before an index.
func stepBefore(a, b step) bool {
	switch a := a.(type) {
	case string:
		b, ok := b.(string)
		return ok && a < b
	case int:
		b, ok := b.(int)
		return ok && a < b
	}
	return false
}

// pathString writes path as "a.b[0].c".
func pathString(path []step) string {
	var b strings.Builder
	for _, s := range path {
		switch s := s.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
		}
	}
	return b.String()
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
