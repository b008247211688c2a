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

// kubeadmDSGolden is kubeadm v1.36.3's kube-proxy DaemonSet, which the
// tests patch as the swap and the rollback do.
const kubeadmDSGolden = "testdata/kubeadm-daemonset.yaml"

// swapPatch is the strategic patch of deploy/README's swap (step 3): image
// becomes the kube-proxy container's image and the readiness probe on
// /healthz comes on, in one change of the pod template.
func swapPatch(image string) string {
	return `{"spec":{"template":{"spec":{"containers":[{"name":"kube-proxy","image":"` + image +
		`","readinessProbe":{"httpGet":{"path":"/healthz","port":10256},"periodSeconds":5,"timeoutSeconds":5,"failureThreshold":3}}]}}}}`
}

// rollbackPatch is the strategic patch of deploy/README's rollback: image
// becomes the kube-proxy container's image and both probes go, in one
// change of the pod template.
func rollbackPatch(image string) string {
	return `{"spec":{"template":{"spec":{"containers":[{"name":"kube-proxy","image":"` + image +
		`","readinessProbe":null,"livenessProbe":null}]}}}}`
}

// ourImage stands for REGISTRY/kube-ipvs-proxy:TAG in the tests.
const ourImage = "registry.example/kube-ipvs-proxy:v1"

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

// applyPatch applies a strategic patch as `kubectl patch --type=strategic`
// does.
func applyPatch(t *testing.T, doc []byte, patch string) []byte {
	t.Helper()
	out, err := strategicpatch.StrategicMergePatch(doc, []byte(patch), appsv1.DaemonSet{})
	if err != nil {
		t.Fatalf("apply %s: %v", patch, err)
	}
	return out
}

func decodeDaemonSet(t *testing.T, doc []byte) *appsv1.DaemonSet {
	t.Helper()
	var ds appsv1.DaemonSet
	if err := json.Unmarshal(doc, &ds); err != nil {
		t.Fatal(err)
	}
	return &ds
}

// TestSwapPatchKubeadmDaemonSet: the swap's patch, applied to kubeadm's
// DaemonSet, sets our image and adds the readiness probe on /healthz to
// the kube-proxy container, no liveness probe, and changes nothing else.
func TestSwapPatchKubeadmDaemonSet(t *testing.T) {
	original := readJSON(t, kubeadmDSGolden)
	before := decodeDaemonSet(t, original)
	after := decodeDaemonSet(t, applyPatch(t, original, swapPatch(ourImage)))
	checkProbes(t, after)
	c := &after.Spec.Template.Spec.Containers[0]
	if c.Image != ourImage {
		t.Errorf("image %q, want %q", c.Image, ourImage)
	}
	// Nothing else changes.
	c.Image, c.ReadinessProbe, c.LivenessProbe = kubeadmImage, nil, nil
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("the patch changes more than the image and the probe (-kubeadm +patched):\n%s", d)
	}
}

// TestRollbackPatchRestoresKubeadmDaemonSet: after the swap's patch, the
// rollback's one patch gives back kubeadm's DaemonSet exactly; so it does
// after a swap by `set image` alone, and after an earlier version of the
// guide, which added a liveness probe too.
func TestRollbackPatchRestoresKubeadmDaemonSet(t *testing.T) {
	original := readJSON(t, kubeadmDSGolden)
	setImage := `{"spec":{"template":{"spec":{"containers":[{"name":"kube-proxy","image":"` + ourImage + `"}]}}}}`
	liveness := `{"spec":{"template":{"spec":{"containers":[{"name":"kube-proxy","livenessProbe":{"httpGet":{"path":"/livez","port":10256}}}]}}}}`
	for _, tc := range []struct {
		name string
		from []byte
	}{
		{"after the swap's patch", applyPatch(t, original, swapPatch(ourImage))},
		{"after set image alone", applyPatch(t, original, setImage)},
		{"with an earlier guide's liveness probe", applyPatch(t, applyPatch(t, original, swapPatch(ourImage)), liveness)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeDaemonSet(t, applyPatch(t, tc.from, rollbackPatch(kubeadmImage)))
			if d := cmp.Diff(decodeDaemonSet(t, original), got); d != "" {
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

// TestKubeadmDaemonSetIsKubeadms: the copy the swap and rollback tests patch is
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
// the backup, then sets our image and the probe in the one patch the tests
// above apply, and no other patch or set image of the DaemonSet (each
// would restart every node's proxy once more, with traffic on it); its
// rollback puts kube-proxy's image back and takes the probes off with the
// one patch the tests above apply.
func TestREADMEProbeCommands(t *testing.T) {
	readme := readFile(t, "README.md")
	preflight := "kube-ipvs-proxy --preflight --kubeconfig"
	backup := "kubectl -n kube-system get ds kube-proxy -o yaml > kube-proxy-backup/daemonset.yaml"
	image := "IMAGE=REGISTRY/kube-ipvs-proxy:TAG"
	swap := "kubectl -n kube-system patch ds kube-proxy --type=strategic -p '" + swapPatch(`'"$IMAGE"'`) + "'"
	rollback := "kubectl -n kube-system patch ds kube-proxy --type=strategic -p '" + rollbackPatch(`'"$KP_IMAGE"'`) + "'"
	at := map[string]int{}
	for _, cmd := range []string{preflight, backup, image, swap, rollback} {
		if at[cmd] = strings.Index(readme, "    "+cmd); at[cmd] < 0 {
			t.Errorf("README has no command line %q", cmd)
		}
	}
	if t.Failed() {
		return
	}
	for _, order := range [][2]string{{preflight, backup}, {backup, image}, {image, swap}, {swap, rollback}} {
		if at[order[0]] > at[order[1]] {
			t.Errorf("README runs %q after %q", order[0], order[1])
		}
	}
	changes := 0
	for _, cmd := range documentedCommands(t, section(t, readme, "README.md", "## Replace kube-proxy on a kubeadm cluster: one image swap")) {
		if strings.HasPrefix(cmd, "kubectl -n kube-system patch ds kube-proxy") || strings.HasPrefix(cmd, "kubectl -n kube-system set image ds/kube-proxy") {
			changes++
		}
	}
	if changes != 1 {
		t.Errorf("the swap changes kube-proxy's DaemonSet %d times, want once", changes)
	}
}
