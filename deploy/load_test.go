package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's Kustomization that these
// manifests use; decoding strictly into it rejects any other field, so a
// new field here is a deliberate choice.
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Namespace  string           `json:"namespace,omitempty"`
	Resources  []string         `json:"resources,omitempty"`
	Images     []kustomizeImage `json:"images,omitempty"`
	Patches    []kustomizePatch `json:"patches,omitempty"`
}

type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
}

type kustomizePatch struct {
	Path string `json:"path"`
}

// newObject returns an empty typed object for apiVersion/kind, or nil for a
// kind the manifests must not hold.
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		return &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "apps/v1 DaemonSet":
		return &appsv1.DaemonSet{}
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		return &kustomization{}
	}
	return nil
}

// object is one YAML document, decoded.
type object struct {
	path string // relative to deploy/, slash-separated
	kind string
	obj  any
}

// decodeAll decodes every document of a YAML stream strictly into its
// typed object: unknown and duplicate fields are errors. name is used in
// error messages.
func decodeAll(name string, data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		obj := newObject(tm.APIVersion, tm.Kind)
		if obj == nil {
			return nil, fmt.Errorf("%s: document %d: unexpected %s %s", name, i, tm.APIVersion, tm.Kind)
		}
		if err := unmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", name, i, tm.Kind, err)
		}
		out = append(out, object{path: name, kind: tm.Kind, obj: obj})
	}
}

// unmarshalStrict decodes one YAML document as the API server's strict
// field validation does: sigs.k8s.io/yaml turns it into JSON (rejecting
// duplicate keys), then sigs.k8s.io/json decodes it case-sensitively and
// rejects unknown fields. (yaml.UnmarshalStrict alone would accept
// "mountpath" for "mountPath": encoding/json matches names case-insensitively.)
func unmarshalStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, obj)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range strings.SplitSeq(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes()
}

// manifests is every YAML file under deploy/, decoded.
type manifests struct {
	files map[string][]object // by slash-separated path relative to deploy/
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{files: map[string][]object{}}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objs, err := decodeAll(filepath.ToSlash(path), data)
		if err != nil {
			return err
		}
		m.files[filepath.ToSlash(path)] = objs
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// paths returns the decoded files' paths, sorted.
func (m *manifests) paths() []string {
	var ps []string
	for p := range m.files {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// one returns the only object of type T in the file at path.
func one[T any](t *testing.T, m *manifests, path string) T {
	t.Helper()
	var found []T
	for _, o := range m.files[path] {
		if v, ok := o.obj.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%s: want exactly one %T, found %d", path, zero, len(found))
	}
	return found[0]
}
