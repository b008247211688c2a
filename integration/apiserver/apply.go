package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side-apply field manager Apply uses.
const FieldManager = "kube-ipvs-proxy-test"

// Apply server-side-applies (create or update, conflicts forced) every
// object in the multi-document YAML or JSON files as the admin: any kind
// the apiserver serves (Namespace, ServiceAccount, ClusterRole,
// ClusterRoleBinding, ConfigMap, Service, EndpointSlice, …); `kind: List`
// is expanded. Namespaces go first, everything else in file order;
// namespaced objects without a namespace go to "default". It fails the
// test on the first error.
func (c *Cluster) Apply(t testing.TB, paths ...string) {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, path := range paths {
		o, err := decodeFile(path)
		if err != nil {
			t.Fatalf("apiserver: apply: %v", err)
		}
		objs = append(objs, o...)
	}
	sort.SliceStable(objs, func(i, j int) bool {
		return objs[i].GetKind() == "Namespace" && objs[j].GetKind() != "Namespace"
	})
	if err := c.applyObjects(objs); err != nil {
		t.Fatalf("apiserver: apply: %v", err)
	}
}

func (c *Cluster) applyObjects(objs []*unstructured.Unstructured) error {
	cfg := c.AdminConfig()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return fmt.Errorf("discover api resources: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, obj := range objs {
		if err := applyOne(ctx, mapper, dyn, obj); err != nil {
			return err
		}
	}
	return nil
}

func applyOne(ctx context.Context, mapper meta.RESTMapper, dyn dynamic.Interface, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	id := fmt.Sprintf("%s %s", gvk.Kind, obj.GetName())
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: map kind: %w", id, err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
		id = fmt.Sprintf("%s %s/%s", gvk.Kind, obj.GetNamespace(), obj.GetName())
		ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}

// decodeFile splits a multi-document YAML (or JSON) file into objects,
// skipping empty documents and expanding lists.
func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(raw) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: raw}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion and kind are required", path, i)
		}
		if !u.IsList() {
			out = append(out, u)
			continue
		}
		err := u.EachListItem(func(o runtime.Object) error {
			out = append(out, o.(*unstructured.Unstructured))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
	}
}
