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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// As kube-proxy's lenient decoding, unknown fields are not an error: each
// is returned as a warning "name: path: unknown field; ignored". A syntax
// error ("name: line: what"), an apiVersion or kind other than
// kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration, or a value of
// the wrong type ("name: path: what", every one of them) is an error.
// Field names are case-sensitive, as in kube-proxy.
func LoadConfig(name string, data []byte) (KubeProxyConfiguration, []string, error) {
	var cfg KubeProxyConfiguration
	doc, err := parseDocument(data)
	if err != nil {
		return cfg, nil, fmt.Errorf("%s: %w", name, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return cfg, nil, fmt.Errorf("%s: want a %s object, got %s", name, ConfigKind, jsonKind(doc))
	}
	if err := checkTypeMeta(obj); err != nil {
		return cfg, nil, fmt.Errorf("%s: %w", name, err)
	}
	d := &decoder{}
	d.decode(obj, reflect.ValueOf(&cfg).Elem(), "")
	var warnings []string
	for _, path := range d.unknown {
		warnings = append(warnings, fmt.Sprintf("%s: %s: unknown field; ignored", name, path))
	}
	if len(d.errs) > 0 {
		for i, e := range d.errs {
			d.errs[i] = fmt.Errorf("%s: %w", name, e)
		}
		return KubeProxyConfiguration{}, warnings, errors.Join(d.errs...)
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

// decoder decodes a generic JSON tree into a struct by its json tags,
// recording unknown fields and every type error with its path.
type decoder struct {
	unknown []string
	errs    []error
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	durationType    = reflect.TypeFor[metav1.Duration]()
)

// isRecord reports whether t is decoded field by field (a struct without
// its own UnmarshalJSON).
func isRecord(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalerType)
}

// decode stores v in dst. JSON null leaves dst as it is (unset), so that
// defaulting fills it, as kube-proxy does for the fields kubeadm writes
// as null.
func (d *decoder) decode(v any, dst reflect.Value, path string) {
	if v == nil {
		return
	}
	t := dst.Type()
	switch {
	case isRecord(t):
		obj, ok := v.(map[string]any)
		if !ok {
			d.fail(path, "want an object, got "+jsonKind(v))
			return
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			i, known := fields[k]
			if !known {
				d.unknown = append(d.unknown, joinPath(path, k))
				continue
			}
			d.decode(obj[k], dst.Field(i), joinPath(path, k))
		}
	case t.Kind() == reflect.Slice && isRecord(t.Elem()):
		arr, ok := v.([]any)
		if !ok {
			d.fail(path, "want a list, got "+jsonKind(v))
			return
		}
		s := reflect.MakeSlice(t, len(arr), len(arr))
		for i, e := range arr {
			d.decode(e, s.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
		dst.Set(s)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		obj, ok := v.(map[string]any)
		if !ok {
			d.fail(path, "want an object, got "+jsonKind(v))
			return
		}
		m := reflect.MakeMapWithSize(t, len(obj))
		for _, k := range sortedKeys(obj) {
			ev := reflect.New(t.Elem()).Elem()
			d.decode(obj[k], ev, joinPath(path, k))
			m.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
		dst.Set(m)
	default:
		d.leaf(v, dst, path)
	}
}

func (d *decoder) leaf(v any, dst reflect.Value, path string) {
	t := dst.Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, isString := v.(string); t == durationType && !isString {
		d.fail(path, fmt.Sprintf("want a duration such as \"30s\", got %s", jsonKind(v)))
		return
	}
	raw, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(raw, dst.Addr().Interface())
	}
	if err == nil {
		return
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			path = joinPath(path, te.Field)
		}
		d.fail(path, fmt.Sprintf("want %s, got %s", te.Type, te.Value))
		return
	}
	d.fail(path, strings.TrimPrefix(err.Error(), "json: "))
}

func (d *decoder) fail(path, msg string) {
	d.errs = append(d.errs, fmt.Errorf("%s: %s", path, msg))
}

// jsonFields maps a struct's JSON names to field indexes.
func jsonFields(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "" && name != "-" {
			fields[name] = i
		}
	}
	return fields
}

func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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
