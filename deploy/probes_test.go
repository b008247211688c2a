package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

const (
	probesPatch     = "probes/probes.yaml"
	kubeadmDSGolden = "probes/testdata/kubeadm-daemonset.yaml"
)

// rollbackPatch is the strategic patch of deploy/README's rollback: image
// becomes the kube-proxy container's image and both probes go, in one
// change of the pod template.
func rollbackPatch(image string) string {
	return `{"spec":{"template":{"spec":{"containers":[{"name":"kube-proxy","image":"` + image +
		`","readinessProbe":null,"livenessProbe":null}]}}}}`
}

// kubeadmImage is the image of the kube-proxy container in kubeadm's
// DaemonSet (kubeadmDSGolden).
const kubeadmImage = "registry.k8s.io/kube-proxy:v1.36.3"

// readJSON reads a YAML file as JSON.
func readJSON(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return j
}

// TestProbesPatchKubeadmDaemonSet: the patch, applied as `kubectl patch
// --type=strategic` applies it to kubeadm's DaemonSet, adds the readiness
// probe on /healthz to the kube-proxy container and no liveness probe, and
// changes nothing else.
func TestProbesPatchKubeadmDaemonSet(t *testing.T) {
	original := readJSON(t, kubeadmDSGolden)
	patched, err := strategicpatch.StrategicMergePatch(original, readJSON(t, probesPatch), appsv1.DaemonSet{})
	if err != nil {
		t.Fatalf("apply %s: %v", probesPatch, err)
	}
	var before, after appsv1.DaemonSet
	if err := json.Unmarshal(original, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(patched, &after); err != nil {
		t.Fatal(err)
	}
	checkProbes(t, &after)
	// Nothing else changes.
	c := &after.Spec.Template.Spec.Containers[0]
	c.ReadinessProbe, c.LivenessProbe = nil, nil
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("the patch changes more than the probes (-kubeadm +patched):\n%s", d)
	}
}

// TestRollbackPatchRestoresKubeadmDaemonSet: after the swap (the probes
// patch, then our image), the rollback's one patch gives back kubeadm's
// DaemonSet exactly; on a DaemonSet that never had the probes it only
// sets the image.
func TestRollbackPatchRestoresKubeadmDaemonSet(t *testing.T) {
	original := readJSON(t, kubeadmDSGolden)
	apply := func(doc []byte, patch string) []byte {
		t.Helper()
		out, err := strategicpatch.StrategicMergePatch(doc, []byte(patch), appsv1.DaemonSet{})
		if err != nil {
			t.Fatalf("apply %s: %v", patch, err)
		}
		return out
	}
	setImage := func(image string) string {
		return `{"spec":{"template":{"spec":{"containers":[{"name":"kube-proxy","image":"` + image + `"}]}}}}`
	}
	swapped := apply(apply(original, string(readJSON(t, probesPatch))), setImage("registry.example/kube-ipvs-proxy:v1"))
	for _, tc := range []struct {
		name string
		from []byte
	}{
		{"after the swap with the probes", swapped},
		{"a DaemonSet without probes", apply(original, setImage("registry.example/kube-ipvs-proxy:v1"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got appsv1.DaemonSet
			if err := json.Unmarshal(original, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(apply(tc.from, rollbackPatch(kubeadmImage)), &got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("the rollback patch does not give kubeadm's DaemonSet back (-kubeadm +rolled back):\n%s", d)
			}
		})
	}
}

// checkProbes: ds has one container, kube-proxy, with readiness on
// /healthz of the health port and no liveness probe, which would restart
// a kube-proxy whose syncs lag on a busy node again and again.
func checkProbes(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	cs := ds.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "kube-proxy" {
		t.Fatalf("containers %v, want kubeadm's one kube-proxy", cs)
	}
	if !isHealthProbe(cs[0].ReadinessProbe, "/healthz") {
		t.Errorf("readiness probe %+v, want GET /healthz on %d", cs[0].ReadinessProbe, healthzPort)
	}
	if cs[0].LivenessProbe != nil {
		t.Errorf("liveness probe %+v, want none", cs[0].LivenessProbe)
	}
}

// TestKubeadmDaemonSetIsKubeadms: the copy the probes test patches is
// what kubeadm v1.36.3 renders, when its source is in the module cache
// (hack/k8s/build.sh fetches it).
func TestKubeadmDaemonSetIsKubeadms(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env GOMODCACHE: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@v1.36.3", "cmd", "kubeadm", "app", "phases", "addons", "proxy", "manifests.go")
	code, err := os.ReadFile(src)
	if err != nil {
		t.Skipf("kubeadm's source is not in the module cache: %v", err)
	}
	_, rest, ok := strings.Cut(string(code), "KubeProxyDaemonSet19 = `")
	tmpl, _, ok2 := strings.Cut(rest, "`")
	if !ok || !ok2 {
		t.Fatalf("%s: no KubeProxyDaemonSet19", src)
	}
	var b bytes.Buffer
	err = template.Must(template.New("ds").Parse(tmpl)).Execute(&b, map[string]string{
		"Image": "registry.k8s.io/kube-proxy:v1.36.3", "ProxyConfigMapKey": "config.conf", "ProxyConfigMap": "kube-proxy"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := yaml.YAMLToJSON(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if got := readJSON(t, kubeadmDSGolden); !bytes.Equal(got, want) {
		t.Errorf("%s is not kubeadm's rendering:\n got %s\nwant %s", kubeadmDSGolden, got, want)
	}
}

// TestREADMEProbeCommands: deploy/README's swap runs the preflight before
// the backup, patches this directory's probes before the image swap, and
// its rollback puts kube-proxy's image back and takes them off with the
// one patch the tests above apply.
func TestREADMEProbeCommands(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	patch := "kubectl -n kube-system patch ds kube-proxy --type=strategic --patch-file deploy/" + probesPatch
	preflight := "kube-ipvs-proxy --preflight --kubeconfig"
	setImage := "kubectl -n kube-system set image ds/kube-proxy kube-proxy=REGISTRY/kube-ipvs-proxy:TAG"
	backup := "kubectl -n kube-system get ds kube-proxy -o yaml > kube-proxy-backup/daemonset.yaml"
	rollback := "kubectl -n kube-system patch ds kube-proxy --type=strategic -p '" + rollbackPatch(`'"$KP_IMAGE"'`) + "'"
	at := map[string]int{}
	for _, cmd := range []string{preflight, backup, patch, setImage, rollback} {
		if at[cmd] = strings.Index(readme, "    "+cmd); at[cmd] < 0 {
			t.Errorf("README has no command line %q", cmd)
		}
	}
	if t.Failed() {
		return
	}
	for _, order := range [][2]string{{preflight, backup}, {patch, setImage}, {setImage, rollback}} {
		if at[order[0]] > at[order[1]] {
			t.Errorf("README runs %q after %q", order[0], order[1])
		}
	}
}
