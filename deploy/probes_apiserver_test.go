package deploy

import (
	"encoding/json"
	"os/exec"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

// TestProbesPatchOnAPIServer runs deploy/README's probe commands against
// a real kube-apiserver holding kubeadm's DaemonSet: the patch puts the
// probes on, the rollback's JSON patch takes them off again.
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
	run("-n", namespace, "patch", "ds", "kube-proxy", "--type=strategic", "--patch-file", probesPatch)
	checkProbes(t, get())
	run("-n", namespace, "patch", "ds", "kube-proxy", "--type=json", "-p", probesOff)
	ds := get()
	if c := ds.Spec.Template.Spec.Containers[0]; c.ReadinessProbe != nil || c.LivenessProbe != nil {
		t.Errorf("after the rollback's patch: readiness %+v, liveness %+v, want none", c.ReadinessProbe, c.LivenessProbe)
	}
}
