package deploy

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kustomizeBuild runs `kubectl kustomize dir` (kustomize build, offline),
// or skips the test when kubectl is not on PATH.
func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not on PATH: kustomize build not checked")
	}
	cmd := exec.CommandContext(t.Context(), kubectl, "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}

// TestKustomizeBuild: every kustomization builds; what it builds decodes
// strictly, sits in kube-system, and (except the base, which is not
// applied alone) has no placeholder left and only registry-qualified,
// tagged images.
func TestKustomizeBuild(t *testing.T) {
	tests := []struct {
		dir   string
		kinds []string // kinds built, sorted
		final bool     // applied as is: no placeholders, real images
	}{
		{baseDir, []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "ServiceAccount"}, false},
		{overlayDir, []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "ServiceAccount"}, true},
		{migrateDir, []string{"DaemonSet"}, true},
		{rollbackDir, []string{"DaemonSet"}, true},
		{handbackDir, []string{"DaemonSet"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			out := kustomizeBuild(t, tc.dir)
			objs, err := decodeAll(tc.dir, out)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.kind)
				meta := o.obj.(metav1.Object)
				clusterScoped := strings.HasPrefix(o.kind, "Cluster")
				if !clusterScoped && meta.GetNamespace() != namespace {
					t.Errorf("%s %s in namespace %q, want %s", o.kind, meta.GetName(), meta.GetNamespace(), namespace)
				}
				if ds, ok := o.obj.(*appsv1.DaemonSet); ok && tc.final {
					checkImages(t, ds)
				}
			}
			slices.Sort(kinds)
			if !slices.Equal(kinds, tc.kinds) {
				t.Errorf("built %v, want %v", kinds, tc.kinds)
			}
			if tc.final && bytes.Contains(out, []byte("__")) {
				t.Errorf("a placeholder is left:\n%s", out)
			}
		})
	}
}

func checkImages(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	for _, c := range append(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers...) {
		host, rest, _ := strings.Cut(c.Image, "/")
		_, tag, tagged := strings.Cut(rest, ":")
		if !strings.ContainsAny(host, ".:") || !tagged || tag == "" {
			t.Errorf("%s: container %s image %q: want registry/name:tag", ds.Name, c.Name, c.Image)
		}
	}
}
