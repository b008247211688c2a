package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

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
// ignored", all of them, also beside errors. A syntax error ("name: line:
// what"), an apiVersion or kind other than
// kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration, or a value of
// the wrong type ("name: path: what"; every one, one a line, in key order)
// is an error. JSON null means unset for a field, also a duration's; a
// null map value is the zero value, as in kube-proxy (featureGates:
// {A: null} turns A off).
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
