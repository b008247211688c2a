package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// LoadConfig decodes a KubeProxyConfiguration document and applies
// kube-proxy's defaults. name is the file name used in messages.
//
// Fields are decoded by sigs.k8s.io/json's UnmarshalStrict, the decoder
// of kube-proxy's codec, so field names are case-sensitive as in
// kube-proxy. As kube-proxy's lenient decoding, unknown fields are not an
// error: each is returned as a warning "name: path: unknown field;
// ignored". A syntax error ("name: line: what"), an apiVersion or kind
// other than kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration, or
// a value of the wrong type ("name: path: what", every one of them) is an
// error. JSON null means unset, also for durations.
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
	cfg, unknown, errs := decodeStrict(obj)
	var warnings []string
	for _, path := range unknown {
		warnings = append(warnings, fmt.Sprintf("%s: %s: unknown field; ignored", name, path))
	}
	if len(errs) > 0 {
		for i, e := range errs {
			errs[i] = fmt.Errorf("%s: %w", name, e)
		}
		return KubeProxyConfiguration{}, warnings, errors.Join(errs...)
	}
	cfg.setDefaults()
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

// maxStrictErrors is how many unknown fields one sigs.k8s.io/json
// UnmarshalStrict call reports at most (its internal limit).
const maxStrictErrors = 100

// decodeStrict decodes obj with sigs.k8s.io/json's UnmarshalStrict, as
// kube-proxy's codec does (case-sensitive), and returns the unknown
// fields' paths and every bad field. The decoder alone stops at the first
// error a field's own UnmarshalJSON returns, reports one type error,
// reports unknown fields only when there is no error, and at most
// maxStrictErrors of them; in those cases locate decodes obj subtree by
// subtree to find them all.
func decodeStrict(obj map[string]any) (KubeProxyConfiguration, []string, []error) {
	var cfg KubeProxyConfiguration
	unknown, err := decodeAt(nil, obj, &cfg)
	if err == nil && len(unknown) < maxStrictErrors {
		return cfg, unknown, nil
	}
	var l locator
	l.check(nil, obj, nil)
	if len(l.errs) > 0 {
		return KubeProxyConfiguration{}, l.unknown, l.errs
	}
	// check unset the nulls the decoder refuses; decode what is left.
	cfg = KubeProxyConfiguration{}
	if _, err := decodeAt(nil, obj, &cfg); err != nil {
		return KubeProxyConfiguration{}, l.unknown, []error{err}
	}
	return cfg, l.unknown, nil
}

// step is one step of a path: a string key or an int index.
type step any

// decodeAt decodes a document holding only v at path into dst (a new
// KubeProxyConfiguration when nil) and returns the unknown fields' paths.
// A list on the path holds v alone, as its element 0 (all elements of a
// list decode alike), so that checking every element of a long list costs
// linear time; unknown fields' paths are given back their real indexes.
func decodeAt(path []step, v any, dst *KubeProxyConfiguration) ([]string, error) {
	decoded := make([]step, len(path)) // path as the decoder sees it
	for i := len(path) - 1; i >= 0; i-- {
		switch s := path[i].(type) {
		case string:
			v, decoded[i] = map[string]any{s: v}, s
		case int:
			v, decoded[i] = []any{v}, 0
		}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("re-encode %s: %w", pathString(path), err)
	}
	if dst == nil {
		dst = &KubeProxyConfiguration{}
	}
	strict, err := sigsjson.UnmarshalStrict(data, dst, sigsjson.DisallowUnknownFields)
	from, to := pathString(decoded), pathString(path)
	var unknown []string
	for _, e := range strict {
		var fe sigsjson.FieldError
		if errors.As(e, &fe) {
			p := fe.FieldPath()
			if rest, ok := strings.CutPrefix(p, from); ok {
				p = to + rest
			}
			unknown = append(unknown, p)
		}
	}
	return unknown, err
}

// locator finds every bad field and unknown field of a document the
// decoder refuses, by decoding its subtrees one at a time.
type locator struct {
	unknown []string
	errs    []error
}

// check decodes v at path. If it fails, a null is unset (as JSON null
// means unset elsewhere, also for a metav1.Duration, whose UnmarshalJSON
// refuses null), a container of the wrong type and a bad leaf are
// errors, and a container of the right type is checked member by member.
// unset removes v from its parent; nil for the root and list elements.
func (l *locator) check(path []step, v any, unset func()) {
	unknown, err := decodeAt(path, v, nil)
	if err == nil && len(unknown) < maxStrictErrors {
		l.unknown = append(l.unknown, unknown...)
		return
	}
	if err != nil && v == nil && unset != nil {
		unset()
		return
	}
	var empty any
	switch v.(type) {
	case map[string]any:
		empty = map[string]any{}
	case []any:
		empty = []any{}
	default:
		l.fail(path, v, err)
		return
	}
	if err != nil {
		if _, shapeErr := decodeAt(path, empty, nil); shapeErr != nil {
			l.fail(path, v, err) // the field takes no such container
			return
		}
	}
	n := len(l.errs)
	switch c := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(c) {
			l.check(append(slices.Clip(path), k), c[k], func() { delete(c, k) })
		}
	case []any:
		for i, e := range c {
			l.check(append(slices.Clip(path), i), e, nil)
		}
	}
	if err != nil && len(l.errs) == n {
		if _, err := decodeAt(path, v, nil); err != nil {
			l.fail(path, v, err)
		}
	}
}

// fail records err for the field at path holding v, as "path: what".
func (l *locator) fail(path []step, v any, err error) {
	fe := &fieldError{path: pathString(path), err: err}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Type != nil {
		fe.msg = typeMessage(path, v, te)
	}
	l.errs = append(l.errs, fe)
}

// typeMessage is "want T, got V", with objects and lists of records
// named as such, and a duration named when a field that takes "30s" but
// not "x" gets a non-string.
func typeMessage(path []step, v any, te *json.UnmarshalTypeError) string {
	t := te.Type
	switch {
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "want an object, got " + jsonKind(v)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return "want a list, got " + jsonKind(v)
	case t.Kind() == reflect.String && isDuration(path):
		return "want a duration such as \"30s\", got " + jsonKind(v)
	}
	return fmt.Sprintf("want %s, got %s", t, te.Value)
}

// isDuration reports whether the field at path reads a duration string:
// it takes "30s" and refuses "x".
func isDuration(path []step) bool {
	_, okErr := decodeAt(path, "30s", nil)
	_, badErr := decodeAt(path, "x", nil)
	return okErr == nil && badErr != nil
}

// fieldError is a bad field: "path: what".
type fieldError struct {
	path string
	msg  string // replaces err's text when set
	err  error
}

func (e *fieldError) Error() string {
	msg := e.msg
	if msg == "" {
		msg = strings.TrimPrefix(e.err.Error(), "json: ")
	}
	return e.path + ": " + msg
}

func (e *fieldError) Unwrap() error { return e.err }

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

func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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
