package deploy

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

// TestProbesPatchOnAPIServer runs deploy/README's probe commands against
// a real kube-apiserver holding kubeadm's DaemonSet: the swap's patch sets
// our image and puts the readiness probe on, and the rollback's one patch
// gives kubeadm's pod template back.
func TestProbesPatchOnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not on PATH")
	}
	c := apiserver.Start(t, apiserver.Options{ExtraArgs: []string{"--allow-privileged=true"}})
	admin := c.Kubeconfig(apiserver.AdminUser)
	run := func(args ...string) string {
		t.Helper()
		out, code := kubectl(t, admin, args...)
		if code != 0 {
			t.Fatalf("kubectl %v: exit %d\n%s", args, code, out)
		}
		return out
	}
	get := func() *appsv1.DaemonSet {
		t.Helper()
		var ds appsv1.DaemonSet
		if err := json.Unmarshal([]byte(run("-n", namespace, "get", "ds", "kube-proxy", "-o", "json")), &ds); err != nil {
			t.Fatal(err)
		}
		return &ds
	}
	run("apply", "--validate=strict", "-f", kubeadmDSGolden)
	kubeadm := get().Spec.Template
	run("-n", namespace, "patch", "ds", "kube-proxy", "--type=strategic", "-p", swapPatch(ourImage))
	swapped := get()
	checkProbes(t, swapped)
	if got := swapped.Spec.Template.Spec.Containers[0].Image; got != ourImage {
		t.Errorf("after the swap's patch, image %q, want %q", got, ourImage)
	}
	run("-n", namespace, "patch", "ds", "kube-proxy", "--type=strategic", "-p", rollbackPatch(kubeadmImage))
	if d := cmp.Diff(kubeadm, get().Spec.Template); d != "" {
		t.Errorf("after the rollback's patch, the pod template is not kubeadm's (-kubeadm +rolled back):\n%s", d)
	}
}
