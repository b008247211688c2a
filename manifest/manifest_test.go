package manifest

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// summary lists objects as "Kind ns/name" in load order, kind by kind.
func summary(o *Objects) []string {
	var out []string
	for _, s := range o.Services {
		out = append(out, "Service "+s.Namespace+"/"+s.Name)
	}
	for _, s := range o.EndpointSlices {
		out = append(out, "EndpointSlice "+s.Namespace+"/"+s.Name)
	}
	for _, n := range o.Nodes {
		out = append(out, "Node "+n.Namespace+"/"+n.Name)
	}
	return out
}

func warningStrings(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.String())
	}
	return out
}

const (
	svcWeb = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: prod\nspec:\n  ports:\n  - port: 80\n"
	epsWeb = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-abc\n  namespace: prod\naddressType: IPv4\nendpoints:\n- addresses: [10.0.0.1]\n"
	nodeA  = "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		input    string
		want     []string
		warnings []string
		wantErr  string
	}{{
		name:  "multi-document YAML loads every document in order",
		file:  "a.yaml",
		input: svcWeb + "---\n" + epsWeb + "--- # node next\n" + nodeA,
		want:  []string{"Service prod/web", "EndpointSlice prod/web-abc", "Node /node-a"},
	}, {
		name: "malformed third document reports the file line of the error",
		file: "bad.yaml",
		input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n" + // lines 1-4
			"---\n" + // 5
			"apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n" + // 6-9
			"---\n" + // 10
			"apiVersion: v1\nkind: Service\nmetadata: x: y\n", // 11-13
		wantErr: "bad.yaml: 13: mapping values are not allowed in this context",
	}, {
		name:    "yaml error without a line number points at the document start",
		file:    "bad.yaml",
		input:   nodeA + "---\n\n# c\nkind: @x\n",
		wantErr: "bad.yaml: 8: found character that cannot start any token",
	}, {
		name:  "JSON file with one object",
		file:  "svc.json",
		input: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"ports":[{"port":80}]}}`,
		want:  []string{"Service default/web"},
	}, {
		name: "concatenated JSON objects each get their own source line",
		file: "objs.json",
		input: "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}}\n" +
			"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Node\"\n}\n" +
			"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n2\"}}",
		want:     []string{"Node /n1", "Node /n2"},
		warnings: []string{"objs.json:2: Node has no metadata.name; skipped"},
	}, {
		name:    "JSON syntax error reports the line of the bad byte",
		file:    "bad.json",
		input:   "{\"kind\": \"Node\"}\n{\n  \"kind\": \"Node\",\n  \"metadata\": x\n}\n",
		wantErr: "bad.json: 4: invalid character 'x' looking for beginning of value",
	}, {
		name:    "truncated JSON reports its last line",
		file:    "bad.json",
		input:   "{\n  \"kind\": \"Node\",\n",
		wantErr: "bad.json: 2: unexpected EOF",
	}, {
		name:  "JSON documents inside a YAML file, after comments",
		file:  "mixed.yaml",
		input: "# json follows\n{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}} {\"apiVersion\":\"v1\",\"kind\":\"Node\"}\n---\n" + svcWeb,
		want:  []string{"Service prod/web", "Node /n1"},
		warnings: []string{
			"mixed.yaml:2: Node has no metadata.name; skipped",
		},
	}, {
		name:  "YAML flow mapping that is not JSON still loads",
		file:  "flow.yaml",
		input: "{apiVersion: v1, kind: Node, metadata: {name: n1}}\n",
		want:  []string{"Node /n1"},
	}, {
		name: "kind List with mixed items, warnings at each item's line",
		file: "list.yaml",
		input: nodeA + "---\napiVersion: v1\nkind: List\nitems:\n" +
			"- {apiVersion: v1, kind: Service, metadata: {name: s1}}\n" +
			"- {apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}\n" +
			"- {apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: s1-x, namespace: ns}, addressType: IPv4}\n" +
			"- 42\n" +
			"- null\n" +
			"- {apiVersion: v1, kind: ServiceList, items: [{apiVersion: v1, kind: Service, metadata: {name: s2}}]}\n" +
			"- {apiVersion: v1, kind: Node, metadata: {name: n2}, spec: {podCIDR: 7}}\n",
		want: []string{"Service default/s1", "Service default/s2", "EndpointSlice ns/s1-x", "Node /node-a"},
		warnings: []string{
			"list.yaml:12: List item 3 is not an object; skipped",
			"list.yaml:15: Node n2: spec.podCIDR: json: cannot unmarshal number into Go struct field NodeSpec.spec.podCIDR of type string; skipped",
		},
	}, {
		name: "block List items and a List in a List: each item at its own line",
		file: "list.yaml",
		input: "# a List\napiVersion: v1\nkind: List\nitems:\n" +
			"- apiVersion: v1\n  kind: Service\n  metadata:\n    name: s1\n" +
			"- apiVersion: v1\n  kind: Service\n  metadata:\n    name: s2\n  spec:\n    ports: [{port: x}]\n" +
			"- apiVersion: v1\n  kind: ServiceList\n  items:\n  - apiVersion: v1\n    kind: Service\n    metadata: {name: s3}\n" +
			"  - apiVersion: v1\n    kind: Service\n    metadata: {name: s4, creationTimestamp: x}\n",
		want: []string{"Service default/s1", "Service default/s3"},
		warnings: []string{
			"list.yaml:9: Service default/s2: spec.ports.port: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32; skipped",
			`list.yaml:21: Service default/s4: metadata.creationTimestamp: want a time such as "2006-01-02T15:04:05Z" (RFC 3339) or null; skipped`,
		},
	}, {
		name: "JSON List items each at their own line",
		file: "list.json",
		input: "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n" +
			"  {\"apiVersion\": \"v1\", \"kind\": \"Service\", \"metadata\": {\"name\": \"s1\"}},\n" +
			"  7,\n" +
			"  {\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n    {\"apiVersion\": \"v1\", \"kind\": \"Service\", \"metadata\": {\"name\": \"s2\"}, \"spec\": {\"ports\": [{\"port\": \"x\"}]}}]}\n" +
			"]}\n",
		want: []string{"Service default/s1"},
		warnings: []string{
			"list.json:3: List item 1 is not an object; skipped",
			"list.json:5: Service default/s2: spec.ports.port: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32; skipped",
		},
	}, {
		name:     "List whose items is not an array warns",
		file:     "list.yaml",
		input:    "apiVersion: v1\nkind: NodeList\nitems: nope\n",
		warnings: []string{"list.yaml:1: NodeList items is not an array; skipped"},
	}, {
		name: "other kinds are skipped silently",
		file: "other.yaml",
		input: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\n" +
			"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n---\n" + nodeA,
		want: []string{"Node /node-a"},
	}, {
		name: "known kind with unsupported apiVersion warns",
		file: "old.yaml",
		input: "apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata:\n  name: web-abc\naddressType: IPv4\n---\n" +
			"kind: Node\nmetadata:\n  name: n1\n",
		warnings: []string{
			"old.yaml:1: EndpointSlice default/web-abc: unsupported apiVersion discovery.k8s.io/v1beta1 for kind EndpointSlice; skipped",
			`old.yaml:7: Node n1: unsupported apiVersion "" for kind Node; skipped`,
		},
	}, {
		name:  "type error warning names the object and the field",
		file:  "types.yaml",
		input: nodeA + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: http\n",
		want:  []string{"Node /node-a"},
		warnings: []string{
			"types.yaml:6: Service default/web: spec.ports.port: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32; skipped",
		},
	}, {
		name:  "a bad creationTimestamp names the field, says skipped and quotes no value",
		file:  "ts.yaml",
		input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  creationTimestamp: \"" + strings.Repeat("y", 300) + "\"\n",
		warnings: []string{
			`ts.yaml:1: Service default/web: metadata.creationTimestamp: want a time such as "2006-01-02T15:04:05Z" (RFC 3339) or null; skipped`,
		},
	}, {
		name:  "a creationTimestamp of the wrong type names the field",
		file:  "ts.yaml",
		input: "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-n\n  creationTimestamp: 5\n",
		warnings: []string{
			`ts.yaml:1: Node node-n: metadata.creationTimestamp: want a time such as "2006-01-02T15:04:05Z" (RFC 3339) or null; skipped`,
		},
	}, {
		name:  "a bad deletionTimestamp names the field",
		file:  "ts.yaml",
		input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  creationTimestamp: null\n  deletionTimestamp: soon\n",
		warnings: []string{
			`ts.yaml:1: Service default/web: metadata.deletionTimestamp: want a time such as "2006-01-02T15:04:05Z" (RFC 3339) or null; skipped`,
		},
	}, {
		name:     "non-string kind warns",
		file:     "k.yaml",
		input:    "apiVersion: v1\nkind: 5\n",
		warnings: []string{"k.yaml:1: kind is not a string; skipped"},
	}, {
		name:     "object without kind warns",
		file:     "k.yaml",
		input:    "apiVersion: v1\nmetadata:\n  name: x\n",
		warnings: []string{"k.yaml:1: no kind; skipped"},
	}, {
		name:     "known kind without name warns",
		file:     "n.yaml",
		input:    "apiVersion: v1\nkind: Service\nmetadata:\n  namespace: x\n",
		warnings: []string{"n.yaml:1: Service has no metadata.name; skipped"},
	}, {
		name: "duplicate replaces the earlier one and takes the later position",
		file: "dup.yaml",
		input: "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\n" +
			"apiVersion: v1\nkind: Service\nmetadata: {name: b}\n---\n" +
			"apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: default}\n---\n" +
			"apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: other}\n---\n" +
			"apiVersion: v1\nkind: Node\nmetadata: {name: a}\n",
		want: []string{"Service default/b", "Service default/a", "Service other/a", "Node /a"},
		warnings: []string{
			"dup.yaml:9: Service default/a: duplicate of dup.yaml:1; this one wins",
		},
	}, {
		name: "empty documents are skipped silently",
		file: "empty.yaml",
		input: "# just a comment\n\n---\n---   \n   \n---\n~\n---\nnull\n...\n" + nodeA +
			"...\n# trailing\n---\n",
		want: []string{"Node /node-a"},
	}, {
		name:     "empty file warns",
		file:     "empty.json",
		input:    " \n\t\n",
		warnings: []string{"empty.json:1: no Kubernetes object in this file"},
	}, {
		name:     "file of comments warns",
		file:     "c.yaml",
		input:    "# nothing\n---\n",
		warnings: []string{"c.yaml:1: no Kubernetes object in this file"},
	}, {
		name:     "empty List warns",
		file:     "l.yaml",
		input:    "apiVersion: v1\nkind: List\nitems: []\n",
		warnings: []string{"l.yaml:1: no Kubernetes object in this file"},
	}, {
		name:  "other built-in kinds are skipped silently",
		file:  "d.yaml",
		input: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
	}, {
		name:     "a misspelt kind warns, naming the kind it resembles",
		file:     "t.yaml",
		input:    nodeA + "---\napiVersion: v1\nkind: Servcie\nmetadata: {name: web, namespace: prod}\n",
		want:     []string{"Node /node-a"},
		warnings: []string{"t.yaml:6: Servcie prod/web: kind Servcie is not a built-in Kubernetes kind (Service?); skipped"},
	}, {
		name:     "a custom resource's kind warns",
		file:     "crd.yaml",
		input:    "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
		warnings: []string{"crd.yaml:1: Widget default/w: kind Widget is not a built-in Kubernetes kind; skipped"},
	}, {
		name:    "scalar document is not an object",
		file:    "s.yaml",
		input:   nodeA + "---\n# c\nhello\n",
		wantErr: "s.yaml: 7: document is not an object",
	}, {
		name:    "top-level JSON array is not an object",
		file:    "a.json",
		input:   "\n[{\"kind\":\"Node\"}]",
		wantErr: "a.json: 2: document is not an object",
	}, {
		name:    "top-level YAML sequence is not an object",
		file:    "a.yaml",
		input:   "- kind: Node\n",
		wantErr: "a.yaml: 1: document is not an object",
	}, {
		name:    "CRLF line endings and a BOM",
		file:    "crlf.yaml",
		input:   "\ufeffapiVersion: v1\r\nkind: Node\r\nmetadata:\r\n  name: n1\r\n---\r\napiVersion: v1\r\nkind: Node\r\nmetadata: x: y\r\n",
		wantErr: "crlf.yaml: 8: mapping values are not allowed in this context",
	}, {
		name:  "directives before --- belong to the document",
		file:  "d.yaml",
		input: "%YAML 1.1\n---\n" + nodeA + "--- !!map\napiVersion: v1\nkind: Node\nmetadata: {name: n2}\n",
		want:  []string{"Node /node-a", "Node /n2"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, warnings, err := Load(tc.file, []byte(tc.input))
			if tc.wantErr != "" {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("Load() error = %v, want *ParseError %q", err, tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Fatalf("Load() error = %q, want %q", err.Error(), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, summary(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, warningStrings(warnings)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadDecodesTypedFields(t *testing.T) {
	objs, warnings, err := Load("all.yaml", []byte(svcWeb+"---\n"+epsWeb+"---\n"+nodeA))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("Load() = %v, %v", warnings, err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"service port", objs.Services[0].Spec.Ports[0].Port, int32(80)},
		{"service TypeMeta kept", objs.Services[0].Kind, "Service"},
		{"endpoint address", objs.EndpointSlices[0].Endpoints[0].Addresses, []string{"10.0.0.1"}},
		{"address type", string(objs.EndpointSlices[0].AddressType), "IPv4"},
		{"node has no namespace", objs.Nodes[0].Namespace, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{{
		name: "warning with object",
		got:  Warning{Source: "f.yaml:12", Object: "Service default/web", Message: "m"}.String(),
		want: "f.yaml:12: Service default/web: m",
	}, {
		name: "warning without object omits it",
		got:  Warning{Source: "f.yaml:3", Message: "no kind; skipped"}.String(),
		want: "f.yaml:3: no kind; skipped",
	}, {
		name: "parse error is file: line: msg",
		got:  (&ParseError{File: "examples/bad.yaml", Line: 7, Msg: "oops"}).Error(),
		want: "examples/bad.yaml: 7: oops",
	}, {
		name: "a parse error with no line has no line number",
		got:  (&ParseError{File: "x.yaml", Msg: "no such file or directory"}).Error(),
		want: "x.yaml: no such file or directory",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want []string
	}{
		{"appends in order", node("a") + "---\n" + svcWeb, node("b") + "---\n" + epsWeb,
			[]string{"Service prod/web", "EndpointSlice prod/web-abc", "Node /a", "Node /b"}},
		{"keeps duplicates", node("a"), node("a"), []string{"Node /a", "Node /a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, _, errA := Load("a.yaml", []byte(tc.a))
			b, _, errB := Load("b.yaml", []byte(tc.b))
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			a.Merge(b)
			a.Merge(nil)
			if diff := cmp.Diff(tc.want, summary(a)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadManyDuplicatesKeepsLastOfEach(t *testing.T) {
	// 10k documents naming two nodes: replacement must stay cheap.
	var b strings.Builder
	for i := range 10000 {
		b.WriteString("---\napiVersion: v1\nkind: Node\nmetadata:\n  name: n")
		b.WriteString(string(rune('a' + i%2)))
		b.WriteString("\n")
	}
	objs, warnings, err := Load("big.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Nodes) != 2 || len(warnings) != 9998 {
		t.Fatalf("got %d nodes, %d warnings", len(objs.Nodes), len(warnings))
	}
}
