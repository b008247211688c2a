package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// LoadConfigFile reads a KubeProxyConfiguration file (YAML or JSON). See
// LoadConfig.
func LoadConfigFile(path string) (KubeProxyConfiguration, []string, error) {
	cfg, _, warnings, err := loadConfigFile(path)
	return cfg, warnings, err
}

func loadConfigFile(path string) (KubeProxyConfiguration, *ownDocument, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return KubeProxyConfiguration{}, nil, nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	// One byte past the limit is enough to refuse the file, however
	// large it is.
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return KubeProxyConfiguration{}, nil, nil, fmt.Errorf("--config: %w", err)
	}
	return loadConfigDocuments(path, data)
}

// maxConfigSize is the largest --config file read: twice what a
// ConfigMap holds (1 MiB). kube-proxy has no limit, but decoding takes
// some 50 times the file's size in memory, and a bad file's messages are
// as long as the file: a file of tens of MiB would take GiBs before the
// first line of its error could be printed.
const maxConfigSize = 2 << 20

// LoadConfig decodes a KubeProxyConfiguration document and applies
// kube-proxy's defaults. name is the file name used in messages.
//
// Fields are decoded by sigs.k8s.io/json's UnmarshalStrict, the decoder
// of kube-proxy's codec, so field names are case-sensitive as in
// kube-proxy. As kube-proxy's lenient decoding, unknown fields are not an
// error: each is returned as a warning "name: path: unknown field;
// ignored", all of them, also beside errors. A syntax error ("name: line:
// what"), an apiVersion or kind other than
// kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration, or a value of
// the wrong type ("name: path: what"; every one, one a line, in key order)
// is an error. JSON null means unset for a field, also a duration's; a
// null map value is the zero value, as in kube-proxy (featureGates:
// {A: null} turns A off).
//
// A key repeated in one object (YAML or JSON) is an error naming the key
// and its line ("name: line: key "k" repeated"), and so is a file over
// maxConfigSize bytes.
//
// A YAML file may hold a second document, kube-ipvs-proxy's own
// KubeIPVSProxyConfiguration (ownconfig.go); LoadConfig checks it and
// leaves it out of the result.
func LoadConfig(name string, data []byte) (KubeProxyConfiguration, []string, error) {
	cfg, _, warnings, err := loadConfigDocuments(name, data)
	return cfg, warnings, err
}

// loadConfigDocuments splits a YAML file into its documents: exactly one
// KubeProxyConfiguration, then at most one KubeIPVSProxyConfiguration.
// Ours first is refused: kube-proxy reads only a file's first document
// and would refuse the file, so rolling a node back to kube-proxy with
// the same ConfigMap would fail. Syntax errors carry the line number in
// the whole file.
func loadConfigDocuments(name string, data []byte) (KubeProxyConfiguration, *ownDocument, []string, error) {
	cfg, own, warnings, err := decodeDocuments(name, data)
	for i, w := range warnings {
		warnings[i] = policy.CutQuoted(w)
	}
	return cfg, own, warnings, cutValues(err)
}

// cutValues cuts the long values err's message quotes (policy.CutQuoted),
// keeping err to unwrap: a file's value can be 2 MiB long, and the
// message is printed, and logged on every node.
func cutValues(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if cut := policy.CutQuoted(text); len(cut) != len(text) {
		return &cutError{msg: cut, err: err}
	}
	return err
}

type cutError struct {
	msg string
	err error
}

func (e *cutError) Error() string { return e.msg }
func (e *cutError) Unwrap() error { return e.err }

func decodeDocuments(name string, data []byte) (KubeProxyConfiguration, *ownDocument, []string, error) {
	if len(data) > maxConfigSize {
		return KubeProxyConfiguration{}, nil, nil, fmt.Errorf("%s: larger than %d MiB, the most kube-ipvs-proxy reads (a ConfigMap holds at most 1 MiB)", name, maxConfigSize>>20)
	}
	var (
		cfg      KubeProxyConfiguration
		haveCfg  bool
		own      *ownDocument
		ownFirst int // the line of our document when it comes first
		warnings []string
	)
	parts := splitDocuments(data)
	for _, part := range parts {
		doc, err := parseDocument(part.data, part.line)
		if err != nil {
			return KubeProxyConfiguration{}, nil, warnings, fmt.Errorf("%s: %w", name, err)
		}
		if doc == nil && len(parts) > 1 {
			continue // an empty document, before a separator or after the last
		}
		obj, ok := doc.(map[string]any)
		if !ok {
			return KubeProxyConfiguration{}, nil, warnings, fmt.Errorf("%s: want a %s object, got %s", name, ConfigKind, jsonKind(doc))
		}
		apiVersion, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		switch {
		case apiVersion == OwnConfigAPIVersion && kind == OwnConfigKind:
			if !haveCfg {
				ownFirst = part.line + 1
			}
			if own != nil {
				return KubeProxyConfiguration{}, nil, warnings, fmt.Errorf("%s: line %d: a second %s document", name, part.line+1, OwnConfigKind)
			}
			d, ws, err := decodeOwn(name, obj)
			warnings = append(warnings, ws...)
			if err != nil {
				return KubeProxyConfiguration{}, nil, warnings, err
			}
			own = d
		case haveCfg:
			return KubeProxyConfiguration{}, nil, warnings, fmt.Errorf("%s: line %d: apiVersion %q, kind %q: after the %s, only one apiVersion %s, kind %s document may follow",
				name, part.line+1, apiVersion, kind, ConfigKind, OwnConfigAPIVersion, OwnConfigKind)
		default:
			if err := checkTypeMeta(obj); err != nil {
				return KubeProxyConfiguration{}, nil, warnings, fmt.Errorf("%s: %w", name, err)
			}
			c, ws, err := decodeKubeProxy(name, obj)
			warnings = append(warnings, ws...)
			if err != nil {
				return KubeProxyConfiguration{}, nil, warnings, err
			}
			cfg, haveCfg = c, true
		}
	}
	if !haveCfg {
		return KubeProxyConfiguration{}, nil, warnings, fmt.Errorf("%s: no %s document", name, ConfigKind)
	}
	if ownFirst > 0 {
		return KubeProxyConfiguration{}, nil, warnings, fmt.Errorf("%s: line %d: the %s document comes before the %s: kube-proxy reads only a file's first document, so it would refuse this file and a rollback to kube-proxy with it would fail; put the %s first",
			name, ownFirst, OwnConfigKind, ConfigKind, ConfigKind)
	}
	return cfg, own, warnings, nil
}

// decodeKubeProxy decodes the KubeProxyConfiguration document (see
// LoadConfig) and applies kube-proxy's defaults.
func decodeKubeProxy(name string, obj map[string]any) (KubeProxyConfiguration, []string, error) {
	cfg, unknown, bad := decode(obj)
	var warnings []string
	for _, path := range unknown {
		warnings = append(warnings, fmt.Sprintf("%s: %s: unknown field; ignored", name, path))
	}
	if len(bad) > 0 {
		for i, e := range bad {
			bad[i] = fmt.Errorf("%s: %w", name, e)
		}
		return KubeProxyConfiguration{}, warnings, errors.Join(bad...)
	}
	setDefaults(&cfg)
	return cfg, warnings, nil
}

// yamlDocument is one document of a file and the 0-based line it starts
// on.
type yamlDocument struct {
	data []byte
	line int
}

var documentSeparatorRE = regexp.MustCompile(`^---[ \t]*(#.*)?\r?$`)

// splitDocuments splits YAML at "---" lines. JSON (the file starts with
// "{") is one document.
func splitDocuments(data []byte) []yamlDocument {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		return []yamlDocument{{data: data}}
	}
	var docs []yamlDocument
	start, startLine := 0, 0
	lines := bytes.SplitAfter(data, []byte("\n"))
	off := 0
	for i, l := range lines {
		if documentSeparatorRE.Match(bytes.TrimRight(l, "\n")) {
			if i > 0 {
				docs = append(docs, yamlDocument{data: data[start:off], line: startLine})
			}
			start, startLine = off+len(l), i+1
		}
		off += len(l)
	}
	return append(docs, yamlDocument{data: data[start:], line: startLine})
}

var (
	yamlLineRE      = regexp.MustCompile(`^yaml: line (\d+): `)
	yamlRepeatedRE  = regexp.MustCompile(`^yaml: unmarshal errors:\n  line (\d+): key (.*) already set in map`)
	jsonDocumentEnd = errors.New("data after the top-level object")
)

// parseDocument parses JSON (a document starting with "{", as kube-proxy's
// decoder tells JSON from YAML) or YAML into a generic tree with
// json.Number numbers. Syntax errors and a repeated key read "line:
// what", the line counted from firstLine, the document's 0-based first
// line in its file.
func parseDocument(data []byte, firstLine int) (any, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	j := data
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		var err error
		// Strict: a repeated key is an error, not its last value.
		if j, err = yaml.YAMLToJSONStrict(data); err != nil {
			return nil, yamlSyntaxError(err, firstLine)
		}
	} else if err := checkRepeatedKeys(j, firstLine); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var doc any
	err := dec.Decode(&doc)
	if err == nil && dec.More() {
		err = jsonDocumentEnd
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return nil, fmt.Errorf("%d: %s", firstLine+1+bytes.Count(j[:min(int(se.Offset), len(j))], []byte("\n")), se.Error())
	case err != nil:
		return nil, err
	}
	return doc, nil
}

// checkRepeatedKeys returns "line: key "k" repeated" for the first key
// of a JSON document that appears twice in one object (encoding/json
// would keep the last value), counting lines from firstLine. Syntax
// errors are left to the decoder.
func checkRepeatedKeys(j []byte, firstLine int) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	type object struct {
		keys     map[string]bool
		atKey    bool // the next token is a key
		isObject bool
	}
	var stack []object
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error the decoder reports
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top >= 0 && stack[top].isObject {
					stack[top].atKey = true
				}
				stack = append(stack, object{keys: map[string]bool{}, atKey: d == '{', isObject: d == '{'})
			default:
				stack = stack[:top]
			}
			continue
		}
		if top < 0 || !stack[top].isObject {
			continue
		}
		if !stack[top].atKey {
			stack[top].atKey = true
			continue
		}
		stack[top].atKey = false
		key, _ := tok.(string)
		if stack[top].keys[key] {
			line := firstLine + 1 + bytes.Count(j[:dec.InputOffset()], []byte("\n"))
			return fmt.Errorf("%d: key %q repeated", line, key)
		}
		stack[top].keys[key] = true
	}
}

// yamlSyntaxError turns a YAMLToJSONStrict error into "line: what", the
// line counted from firstLine.
func yamlSyntaxError(err error, firstLine int) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if m := yamlRepeatedRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return fmt.Errorf("%d: key %s repeated", firstLine+n, m[2])
	}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		msg = strconv.Itoa(firstLine+n) + ": " + msg[len(m[0]):]
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
