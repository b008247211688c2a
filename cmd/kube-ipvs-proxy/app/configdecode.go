package app

import (
	"bytes"
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
// A null a field refuses may be deleted from obj.
//
// UnmarshalStrict alone returns only the first bad value, no unknown
// fields beside one, and at most maxStrictErrors unknown fields. So when
// the whole document fails or fills that list, decode walks it: each
// member of a container that failed (or filled the list) is decoded
// alone, at its path, and only a member that fails (or fills the list)
// alone is walked into. Every value is decoded once per level of the
// configuration's types above it, which are a few deep, so the time is
// linear in the document's size whatever it holds.
//
// A null that the field refuses (metav1.Duration's UnmarshalJSON does)
// is removed as unset, not reported: null means unset. Other nulls are
// decoded as they are, as kube-proxy does: nothing for a field, the zero
// value for a map value (featureGates: {A: null} is A=false).
func decode(obj map[string]any) (cfg KubeProxyConfiguration, unknown []string, bad []error) {
	listed, err := unmarshalStrict(obj, &cfg)
	if err == nil && len(listed) < maxStrictErrors {
		return cfg, listed, nil
	}
	w := walker{duration: map[string]bool{}, takes: map[string]bool{}}
	w.walk(nil, obj, listed, err)
	if len(w.bad) > 0 || err == nil {
		return cfg, w.unknown, w.bad
	}
	// Only refused nulls failed: decode again without them.
	for _, n := range w.nulls {
		delete(n.parent, n.key)
	}
	cfg = KubeProxyConfiguration{}
	if _, err := unmarshalStrict(obj, &cfg); err != nil {
		return cfg, w.unknown, []error{errors.New(strings.TrimPrefix(err.Error(), "json: "))} // not reached
	}
	return cfg, w.unknown, nil
}

// walker collects decode's findings in key order.
type walker struct {
	unknown []string
	bad     []error
	nulls   []nullMember // refused nulls: unset, deleted before the last decoding
	// Answers that depend only on the field, by its path in the
	// document decodeAt builds (list indexes all 0).
	duration, takes map[string]bool
	buf             bytes.Buffer           // decodeAt's document
	scratch         KubeProxyConfiguration // what decodeAt decodes into, unused
}

// nullMember is a map member holding a null that its field refuses.
type nullMember struct {
	parent map[string]any
	key    string
}

// walk takes v, the value at path, and what decoding it alone at path
// returned: the unknown fields listed and the error. It records them,
// walking into v's members when that result is not complete: an error
// (which names only the first bad value, and not always where) or a full
// list of unknown fields.
func (w *walker) walk(path []step, v any, listed []string, err error) {
	if err == nil && len(listed) < maxStrictErrors {
		w.addUnknown(path, listed)
		return
	}
	found := len(w.bad) + len(w.nulls)
	switch c := v.(type) {
	case map[string]any:
		if !w.takesContainer(path, map[string]any{}) {
			break
		}
		for _, k := range slices.Sorted(maps.Keys(c)) {
			sub := append(slices.Clip(path), k)
			l, e := w.decodeAt(sub, c[k])
			if e != nil && c[k] == nil {
				w.nulls = append(w.nulls, nullMember{c, k})
				continue
			}
			w.walk(sub, c[k], l, e)
		}
	case []any:
		if !w.takesContainer(path, []any{}) {
			break
		}
		for i, e := range c {
			sub := append(slices.Clip(path), i)
			l, subErr := w.decodeAt(sub, e)
			w.walk(sub, e, l, subErr)
		}
	}
	if err == nil || len(w.bad)+len(w.nulls) > found {
		return
	}
	// No member fails alone: v itself is the bad value.
	if len(path) == 0 {
		w.bad = append(w.bad, errors.New(strings.TrimPrefix(err.Error(), "json: ")))
		return
	}
	w.bad = append(w.bad, fmt.Errorf("%s: %s", pathString(path), w.describe(path, v, err)))
}

// takesContainer reports whether the field at path takes a container of
// empty's kind (the document itself takes an object).
func (w *walker) takesContainer(path []step, empty any) bool {
	if len(path) == 0 {
		return true
	}
	key := fieldKey(path) + "\x00" + jsonKind(empty)
	ok, seen := w.takes[key]
	if !seen {
		_, err := w.decodeAt(path, empty)
		ok = err == nil
		w.takes[key] = ok
	}
	return ok
}

// addUnknown records the unknown fields that decoding the value at path
// alone listed, their paths turned from decodeAt's document's (list
// indexes 0) into the real one's.
func (w *walker) addUnknown(path []step, listed []string) {
	synthetic, real := fieldKey(path), pathString(path)
	for _, u := range listed {
		if rest, ok := strings.CutPrefix(u, synthetic); ok {
			u = real + rest
		}
		w.unknown = append(w.unknown, u)
	}
}

// fieldKey is path as decodeAt's document holds it: "a.b[0].c", every
// list index 0.
func fieldKey(path []step) string {
	generic := make([]step, len(path))
	for i, s := range path {
		if _, ok := s.(int); ok {
			s = 0
		}
		generic[i] = s
	}
	return pathString(generic)
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
	return strictJSON(data, dst)
}

func strictJSON(data []byte, dst *KubeProxyConfiguration) ([]string, error) {
	strict, err := sigsjson.UnmarshalStrict(data, dst, sigsjson.DisallowUnknownFields)
	var unknown []string
	for _, e := range strict {
		if fe, ok := e.(sigsjson.FieldError); ok {
			unknown = append(unknown, fe.FieldPath())
		}
	}
	return unknown, err
}

// decodeAt decodes the document holding only v at path and returns the
// unknown fields listed and the error. A list on the path holds v alone,
// as its element 0: all elements of a list decode alike.
func (w *walker) decodeAt(path []step, v any) ([]string, error) {
	// Written directly, not as nested maps for json.Marshal, into one
	// buffer and one KubeProxyConfiguration: the walk decodes every
	// member of a failed container this way.
	b := &w.buf
	b.Reset()
	for _, s := range path {
		switch s := s.(type) {
		case string:
			key, err := json.Marshal(s)
			if err != nil {
				return nil, fmt.Errorf("re-encode: %w", err) // not reached: a string encodes
			}
			b.WriteByte('{')
			b.Write(key)
			b.WriteByte(':')
		case int:
			b.WriteByte('[')
		}
	}
	val, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("re-encode: %w", err)
	}
	b.Write(val)
	for i := len(path) - 1; i >= 0; i-- {
		if _, ok := path[i].(int); ok {
			b.WriteByte(']')
		} else {
			b.WriteByte('}')
		}
	}
	w.scratch = KubeProxyConfiguration{}
	return strictJSON(b.Bytes(), &w.scratch)
}

// describe is the bad value v's error: "want T, got V" for a type error
// (objects and lists named as such, and a duration named when the field
// takes "30s" but not "x"), else the decoder's own words.
func (w *walker) describe(path []step, v any, err error) string {
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
	case k == reflect.String && w.isDuration(path):
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
func (w *walker) isDuration(path []step) bool {
	key := fieldKey(path)
	d, seen := w.duration[key]
	if !seen {
		_, ok := w.decodeAt(path, "30s")
		_, notX := w.decodeAt(path, "x")
		d = ok == nil && notX != nil
		w.duration[key] = d
	}
	return d
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
