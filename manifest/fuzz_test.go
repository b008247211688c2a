package manifest

import (
	"errors"
	"strings"
	"testing"
)

func FuzzLoad(f *testing.F) {
	seeds := []struct {
		name, data string
	}{
		{"a.yaml", svcWeb + "---\n" + epsWeb + "--- # c\n" + nodeA},
		{"a.yaml", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n}}\n- 1\n"},
		{"a.yaml", "apiVersion: v1\nkind: ServiceList\nitems: [{kind: List, items: [{apiVersion: v1, kind: Service, metadata: {name: s}}]}]\n"},
		{"a.json", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}{"kind":"Service"}`},
		{"a.json", `[{"kind":"Node"}]`},
		{"a.json", "{\n\"kind\": \"Node\",\n"},
		{"a.yaml", "metadata: x: y\n"},
		{"a.yaml", "# only\n---\n...\n~\n"},
		{"a.yaml", "%YAML 1.1\n---\nkind: Node\n--- !!map\nkind: Service\n"},
		{"a.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: w}\nspec: {ports: [{port: http}]}\n"},
		{"a.yaml", "apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: e}\n"},
		{"a.yaml", "a: &a [*a]\n"},
		{"a.yaml", "hello\n"},
		{"a.yaml", "{a: 1,}\n"},
		{"a.yaml", "kind: Node\nmetadata: {name: n, creationTimestamp: bad}\nstatus: {capacity: {cpu: x}}\n"},
	}
	for _, s := range seeds {
		f.Add(s.name, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		objs, warnings, err := Load(name, data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			if !strings.HasPrefix(err.Error(), name) {
				t.Fatalf("error %q does not start with the file name %q", err, name)
			}
			return
		}
		if objs == nil {
			t.Fatal("nil Objects without error")
		}
		for _, s := range objs.Services {
			if s == nil || s.Name == "" || s.Namespace == "" {
				t.Fatalf("bad service %#v", s)
			}
		}
		for _, e := range objs.EndpointSlices {
			if e == nil || e.Name == "" || e.Namespace == "" {
				t.Fatalf("bad endpoint slice %#v", e)
			}
		}
		for _, n := range objs.Nodes {
			if n == nil || n.Name == "" {
				t.Fatalf("bad node %#v", n)
			}
		}
		for _, w := range warnings {
			if !strings.HasPrefix(w.Source, name+":") {
				t.Fatalf("warning source %q does not start with %q", w.Source, name)
			}
		}
	})
}
