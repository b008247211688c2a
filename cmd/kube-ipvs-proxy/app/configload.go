package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// LoadConfigFile reads a KubeProxyConfiguration file (YAML or JSON). See
// LoadConfig.
func LoadConfigFile(path string) (KubeProxyConfiguration, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return KubeProxyConfiguration{}, nil, fmt.Errorf("--config: %w", err)
	}
	return LoadConfig(path, data)
}

// maxStrictErrors is how many unknown fields one sigs.k8s.io/json
// UnmarshalStrict call reports at most (its internal limit).
const maxStrictErrors = 100

// LoadConfig decodes a KubeProxyConfiguration document and applies
// kube-proxy's defaults. name is the file name used in messages.
//
// Fields are decoded by sigs.k8s.io/json's UnmarshalStrict, the decoder
// of kube-proxy's codec, so field names are case-sensitive as in
// kube-proxy. As kube-proxy's lenient decoding, unknown fields are not an
// error: each is returned as a warning "name: path: unknown field;
// ignored" (the first maxStrictErrors of them, then a notice). A syntax
// error ("name: line: what"), an apiVersion or kind other than
// kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration, or a value of
// the wrong type ("name: path: what") is an error. JSON null means unset,
// also for durations.
//
// UnmarshalStrict keeps only the first bad value, and returns the unknown
// fields only when decoding succeeds; so a file with a bad value gets one
// error and no unknown-field warnings, and the next load, once it is
// fixed, reports the rest.
func LoadConfig(name string, data []byte) (KubeProxyConfiguration, []string, error) {
	doc, err := parseDocument(data)
	if err != nil {
		return KubeProxyConfiguration{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return KubeProxyConfiguration{}, nil, fmt.Errorf("%s: want a %s object, got %s", name, ConfigKind, jsonKind(doc))
	}
	if err := checkTypeMeta(obj); err != nil {
		return KubeProxyConfiguration{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	// metav1.Duration's UnmarshalJSON refuses null; dropping every null
	// member makes null mean unset for all fields alike.
	dropNulls(obj)
	var cfg KubeProxyConfiguration
	unknown, err := unmarshalStrict(obj, &cfg)
	if err != nil {
		return KubeProxyConfiguration{}, nil, fmt.Errorf("%s: %w", name, locate(nil, obj, err))
	}
	var warnings []string
	for _, path := range unknown {
		warnings = append(warnings, fmt.Sprintf("%s: %s: unknown field; ignored", name, path))
	}
	if len(unknown) >= maxStrictErrors {
		warnings = append(warnings, fmt.Sprintf("%s: only the first %d unknown fields are listed", name, maxStrictErrors))
	}
	setDefaults(&cfg)
	return cfg, warnings, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// parseDocument parses JSON (a document starting with "{", as kube-proxy's
// decoder tells JSON from YAML) or YAML into a generic tree with
// json.Number numbers. Syntax errors read "line: what".
func parseDocument(data []byte) (any, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	j := data
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		var err error
		if j, err = yaml.YAMLToJSON(data); err != nil {
			return nil, yamlSyntaxError(err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var doc any
	err := dec.Decode(&doc)
	if err == nil && dec.More() {
		err = errors.New("data after the top-level object")
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return nil, fmt.Errorf("%d: %s", 1+bytes.Count(j[:min(int(se.Offset), len(j))], []byte("\n")), se.Error())
	case err != nil:
		return nil, err
	}
	return doc, nil
}

// yamlSyntaxError turns a YAMLToJSON error into "line: what".
func yamlSyntaxError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		msg = m[1] + ": " + msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return errors.New(msg)
}

func checkTypeMeta(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == ConfigAPIVersion && kind == ConfigKind {
		return nil
	}
	return fmt.Errorf("apiVersion %q, kind %q: want apiVersion %s, kind %s",
		apiVersion, kind, ConfigAPIVersion, ConfigKind)
}

// dropNulls deletes every null object member, at any depth. Null list
// elements stay: a list's length is the user's.
func dropNulls(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
			} else {
				dropNulls(e)
			}
		}
	case []any:
		for _, e := range v {
			dropNulls(e)
		}
	}
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

// locate names the bad value behind err, the error UnmarshalStrict
// returned for v at path, as "path: what". The decoder's own type errors
// name the struct field but not a map key or list index below it, and an
// error from a field's UnmarshalJSON (a duration, a quantity) names
// nothing; so, if the field takes v's kind of container, v's members are
// decoded one at a time, in key order, down to the first that fails alone.
func locate(path []step, v any, err error) error {
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
	for _, m := range members {
		sub := append(slices.Clip(path), m)
		var val any
		if i, ok := m.(int); ok {
			val = v.([]any)[i]
		} else {
			val = v.(map[string]any)[m.(string)]
		}
		if subErr := decodeAt(sub, val); subErr != nil {
			return locate(sub, val, subErr)
		}
	}
	if len(path) == 0 {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return fmt.Errorf("%s: %s", pathString(path), describe(path, v, err))
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
