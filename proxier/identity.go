package proxier

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// identity is the metadata a converted object keeps in an informer's
// cache: what the cache's key, the resync check and the loop's logs read
// (namespace, name, resource version). It implements metav1.Object so
// that the cache and klog.KObj take it as they take an API object; the
// other fields read as empty and their setters do nothing, as for an
// object that has none. It is a fraction of metav1.ObjectMeta's size, for
// each Service and EndpointSlice (benchmarks/NOTES.md, memory). The UID,
// 36 bytes of text per object, is kept only where an Event names the
// object (convertedService.uid).
type identity struct {
	namespace, name, resourceVersion string
}

func identityOf(m *metav1.ObjectMeta) identity {
	return identity{namespace: m.Namespace, name: m.Name, resourceVersion: m.ResourceVersion}
}

var _ metav1.Object = (*identity)(nil)

func (i *identity) GetNamespace() string                          { return i.namespace }
func (i *identity) SetNamespace(namespace string)                 { i.namespace = namespace }
func (i *identity) GetName() string                               { return i.name }
func (i *identity) SetName(name string)                           { i.name = name }
func (i *identity) GetUID() types.UID                             { return "" }
func (i *identity) SetUID(types.UID)                              {}
func (i *identity) GetResourceVersion() string                    { return i.resourceVersion }
func (i *identity) SetResourceVersion(version string)             { i.resourceVersion = version }
func (i *identity) GetGenerateName() string                       { return "" }
func (i *identity) SetGenerateName(string)                        {}
func (i *identity) GetGeneration() int64                          { return 0 }
func (i *identity) SetGeneration(int64)                           {}
func (i *identity) GetSelfLink() string                           { return "" }
func (i *identity) SetSelfLink(string)                            {}
func (i *identity) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (i *identity) SetCreationTimestamp(metav1.Time)              {}
func (i *identity) GetDeletionTimestamp() *metav1.Time            { return nil }
func (i *identity) SetDeletionTimestamp(*metav1.Time)             {}
func (i *identity) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (i *identity) SetDeletionGracePeriodSeconds(*int64)          {}
func (i *identity) GetLabels() map[string]string                  { return nil }
func (i *identity) SetLabels(map[string]string)                   {}
func (i *identity) GetAnnotations() map[string]string             { return nil }
func (i *identity) SetAnnotations(map[string]string)              {}
func (i *identity) GetFinalizers() []string                       { return nil }
func (i *identity) SetFinalizers([]string)                        {}
func (i *identity) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (i *identity) SetOwnerReferences([]metav1.OwnerReference)    {}
func (i *identity) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (i *identity) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
