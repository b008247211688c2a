package deploy

import (
	"net/netip"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// The files and names the README and the tests rely on.
const (
	baseDir      = "base"
	overlayDir   = "overlays/example"
	migrateDir   = "migrate"
	rollbackDir  = "rollback"
	handbackDir  = "handback"
	name         = "kube-ipvs-proxy" // every base object, and the image name overlays replace
	namespace    = "kube-system"
	binary       = "/usr/local/bin/kube-ipvs-proxy"
	healthzPort  = 10256
	configKey    = "config.conf"
	kubeconfKey  = "kubeconfig.conf"
	podCIDRPH    = "__POD_CIDR__"
	endpointPH   = "__CONTROL_PLANE_ENDPOINT__"
	cleanupImage = "registry.k8s.io/kube-proxy"
)

func baseDaemonSet(t *testing.T, m *manifests) *appsv1.DaemonSet {
	return one[*appsv1.DaemonSet](t, m, baseDir+"/daemonset.yaml")
}

func baseConfigMap(t *testing.T, m *manifests) *corev1.ConfigMap {
	return one[*corev1.ConfigMap](t, m, baseDir+"/configmap.yaml")
}

// TestStrictDecoding: the decoder used for every file rejects an unknown
// field and an unknown kind, so the other tests' "decodes" means something.
func TestStrictDecoding(t *testing.T) {
	tests := []struct{ name, doc string }{
		{"unknown field", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: x}\nautomount: true\n"},
		{"field in the wrong case", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {Name: x}\n"},
		{"misplaced field", "apiVersion: apps/v1\nkind: DaemonSet\nspec:\n  hostNetwork: true\n"},
		{"duplicate field", "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\ndata: {c: d}\n"},
		{"unexpected kind", "apiVersion: v1\nkind: Secret\n"},
		{"unknown kustomize field", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nbases: [../x]\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeAll("x.yaml", []byte(tc.doc)); err == nil {
				t.Fatal("decoded without error")
			}
		})
	}
}

// TestManifestsDecode: every YAML file under deploy/ decodes strictly, and
// the expected files are there.
func TestManifestsDecode(t *testing.T) {
	m := loadManifests(t)
	want := []string{
		"base/clusterrole.yaml", "base/clusterrolebinding.yaml", "base/configmap.yaml",
		"base/daemonset.yaml", "base/kustomization.yaml", "base/serviceaccount.yaml",
		"handback/kustomization.yaml", "handback/table-only.yaml", "migrate/kube-proxy-cleanup.yaml", "migrate/kustomization.yaml",
		"overlays/example/config.yaml", "overlays/example/kustomization.yaml",
		"rollback/cleanup-daemonset.yaml", "rollback/kustomization.yaml",
		"testdata/kubeadm-daemonset.yaml",
	}
	if diff := cmp.Diff(want, m.paths()); diff != "" {
		t.Errorf("YAML files under deploy/ (-want +got):\n%s", diff)
	}
}

// TestDaemonSetShape: the DaemonSet keeps kubeadm's kube-proxy shape and
// the differences the README states.
func TestDaemonSetShape(t *testing.T) {
	m := loadManifests(t)
	ds := baseDaemonSet(t, m)
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("want one container and no init container, got %d and %d", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	checks := []struct {
		name string
		ok   bool
	}{
		{"namespace kube-system", ds.Namespace == namespace},
		{"selector matches the template labels", ds.Spec.Selector != nil && ds.Spec.Selector.MatchLabels["k8s-app"] == name &&
			ds.Spec.Template.Labels["k8s-app"] == name},
		{"rolling update", ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType},
		{"host network", pod.HostNetwork},
		{"node DNS, not ClusterFirstWithHostNet", pod.DNSPolicy == "" || pod.DNSPolicy == corev1.DNSClusterFirst},
		{"priority class system-node-critical", pod.PriorityClassName == "system-node-critical"},
		{"tolerates every taint", slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Operator == corev1.TolerationOpExists && tl.Key == "" && tl.Effect == ""
		})},
		{"linux nodes only", pod.NodeSelector["kubernetes.io/os"] == "linux" && len(pod.NodeSelector) == 1},
		{"service account", pod.ServiceAccountName == name},
		{"privileged", c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged},
		{"command", slices.Equal(c.Command, []string{binary, "--config=/var/lib/kube-ipvs-proxy/" + configKey, "--hostname-override=$(NODE_NAME)"})},
		{"no args", len(c.Args) == 0},
		{"NODE_NAME from spec.nodeName", slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
		})},
		{"liveness probe GET /livez on the health port", isHealthProbe(c.LivenessProbe, "/livez")},
		{"readiness probe GET /healthz on the health port", isHealthProbe(c.ReadinessProbe, "/healthz")},
		{"cpu and memory requests", !c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero()},
		{"no cpu limit", c.Resources.Limits.Cpu().IsZero()},
		{"/lib/modules read-only from the host", mountsHostPath(pod, c, "/lib/modules", "/lib/modules", true)},
		{"the host's xtables lock, as kubeadm's", mountsHostPath(pod, c, "/run/xtables.lock", "/run/xtables.lock", false)},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if !ck.ok {
				t.Errorf("%s: not so in %s/daemonset.yaml", ck.name, baseDir)
			}
		})
	}
}

func isHealthProbe(p *corev1.Probe, path string) bool {
	if p == nil || p.HTTPGet == nil {
		return false
	}
	g := p.HTTPGet
	return g.Path == path && g.Port == intstr.FromInt32(healthzPort) && g.Host == "" &&
		(g.Scheme == "" || g.Scheme == corev1.URISchemeHTTP)
}

// mountsHostPath: container c mounts the hostPath volume hostPath at
// mountPath, read-only if readOnly.
func mountsHostPath(pod corev1.PodSpec, c corev1.Container, hostPath, mountPath string, readOnly bool) bool {
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != mountPath || vm.ReadOnly != readOnly {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.HostPath != nil && v.HostPath.Path == hostPath {
				return true
			}
		}
	}
	return false
}

// configMapFile returns the ConfigMap name and key a path inside container
// c comes from, if it is mounted from a ConfigMap volume.
func configMapFile(pod corev1.PodSpec, c corev1.Container, file string) (cm, key string, ok bool) {
	for _, vm := range c.VolumeMounts {
		rel, found := strings.CutPrefix(file, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !found || vm.SubPath != "" {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && len(v.ConfigMap.Items) == 0 {
				return v.ConfigMap.Name, rel, true
			}
		}
	}
	return "", "", false
}

// TestConfigMountedWhereFlagsPoint: --config and the config's
// clientConnection.kubeconfig name files of the ConfigMap, as mounted.
func TestConfigMountedWhereFlagsPoint(t *testing.T) {
	m := loadManifests(t)
	ds, cm := baseDaemonSet(t, m), baseConfigMap(t, m)
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	var configPath string
	for _, a := range c.Command {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			configPath = v
		}
	}
	cfg := kubeProxyConfig(t, cm.Data[configKey])
	kubeconfig, _ := cfg["clientConnection"].(map[string]any)["kubeconfig"].(string)
	for _, file := range []string{configPath, kubeconfig} {
		t.Run(file, func(t *testing.T) {
			cmName, key, ok := configMapFile(pod, c, file)
			if !ok {
				t.Fatalf("%q is not on a ConfigMap volume mount", file)
			}
			if cmName != cm.Name {
				t.Errorf("%q comes from ConfigMap %q, want %q", file, cmName, cm.Name)
			}
			if _, ok := cm.Data[key]; !ok {
				t.Errorf("%q: ConfigMap %s has no key %q", file, cm.Name, key)
			}
		})
	}
}

// kubeProxyFields are KubeProxyConfiguration v1alpha1's fields
// (k8s.io/kube-proxy/config/v1alpha1, v0.36): top level, and the sections
// the config sets.
var kubeProxyFields = map[string][]string{
	"": {"apiVersion", "kind", "featureGates", "clientConnection", "logging", "hostnameOverride", "bindAddress",
		"healthzBindAddress", "metricsBindAddress", "bindAddressHardFail", "enableProfiling",
		"showHiddenMetricsForVersion", "mode", "iptables", "ipvs", "nftables", "winkernel", "detectLocalMode",
		"detectLocal", "clusterCIDR", "nodePortAddresses", "oomScoreAdj", "conntrack", "configSyncPeriod",
		"portRange", "windowsRunAsService"},
	"clientConnection": {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"},
	"ipvs": {"syncPeriod", "minSyncPeriod", "scheduler", "excludeCIDRs", "strictARP", "tcpTimeout",
		"tcpFinTimeout", "udpTimeout"},
}

// kubeProxyConfig parses a config.conf and checks it is an IPVS-mode
// KubeProxyConfiguration with only known fields.
func kubeProxyConfig(t *testing.T, data string) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatalf("%s: %v", configKey, err)
	}
	if cfg["apiVersion"] != "kubeproxy.config.k8s.io/v1alpha1" || cfg["kind"] != "KubeProxyConfiguration" {
		t.Fatalf("%s: want kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration, got %v %v", configKey, cfg["apiVersion"], cfg["kind"])
	}
	if cfg["mode"] != "ipvs" {
		t.Errorf("%s: mode %v, want ipvs", configKey, cfg["mode"])
	}
	for section, known := range kubeProxyFields {
		fields := cfg
		if section != "" {
			fields, _ = cfg[section].(map[string]any)
		}
		for k := range fields {
			if !slices.Contains(known, k) {
				t.Errorf("%s: unknown field %s", configKey, strings.TrimPrefix(section+"."+k, "."))
			}
		}
	}
	if _, ok := cfg["clientConnection"].(map[string]any); !ok {
		t.Fatalf("%s: no clientConnection", configKey)
	}
	return cfg
}

// TestKubeProxyConfiguration: the ConfigMap holds an IPVS-mode
// KubeProxyConfiguration with kube-proxy's default addresses, and its
// health port is the one the probes use.
func TestKubeProxyConfiguration(t *testing.T) {
	m := loadManifests(t)
	cfg := kubeProxyConfig(t, baseConfigMap(t, m).Data[configKey])
	want := map[string]any{
		"bindAddress":        "0.0.0.0",
		"healthzBindAddress": "0.0.0.0:10256",
		"metricsBindAddress": "127.0.0.1:10249",
		"clusterCIDR":        podCIDRPH,
	}
	for k, v := range want {
		t.Run(k, func(t *testing.T) {
			if cfg[k] != v {
				t.Errorf("%s = %v, want %v", k, cfg[k], v)
			}
		})
	}
	t.Run("probes use the health port", func(t *testing.T) {
		ap, err := netip.ParseAddrPort(cfg["healthzBindAddress"].(string))
		if err != nil || ap.Port() != healthzPort {
			t.Errorf("healthzBindAddress %v: port is not %d (%v)", cfg["healthzBindAddress"], healthzPort, err)
		}
	})
}

// TestOverlayFillsOnlyPlaceholders: the example overlay's ConfigMap is the
// base's with the placeholders replaced by valid values, so the two cannot
// drift apart.
func TestOverlayFillsOnlyPlaceholders(t *testing.T) {
	m := loadManifests(t)
	base := baseConfigMap(t, m)
	over := one[*corev1.ConfigMap](t, m, overlayDir+"/config.yaml")
	if over.Name != base.Name || over.Namespace != base.Namespace {
		t.Fatalf("overlay patches %s/%s, want %s/%s", over.Namespace, over.Name, base.Namespace, base.Name)
	}
	overCfg := kubeProxyConfig(t, over.Data[configKey])
	cidrs, _ := overCfg["clusterCIDR"].(string)
	for c := range strings.SplitSeq(cidrs, ",") {
		if _, err := netip.ParsePrefix(c); err != nil {
			t.Errorf("overlay clusterCIDR %q: %v", cidrs, err)
		}
	}
	server := kubeconfigServer(t, over.Data[kubeconfKey])
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Port() == "" || strings.Contains(server, "__") {
		t.Errorf("overlay kubeconfig server %q: want https://host:port (%v)", server, err)
	}
	replacer := strings.NewReplacer(podCIDRPH, cidrs, endpointPH, u.Host)
	for _, key := range []string{configKey, kubeconfKey} {
		t.Run(key, func(t *testing.T) {
			if got, want := over.Data[key], replacer.Replace(base.Data[key]); got != want {
				t.Errorf("overlay's %s is not the base's with placeholders filled (-want +got):\n%s", key, cmp.Diff(want, got))
			}
		})
	}
	if len(over.Data) != 2 {
		t.Errorf("overlay ConfigMap has %d keys, want %s and %s", len(over.Data), configKey, kubeconfKey)
	}
}

func kubeconfigServer(t *testing.T, data string) string {
	t.Helper()
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
			} `json:"cluster"`
		} `json:"clusters"`
	}
	if err := yaml.Unmarshal([]byte(data), &kc); err != nil || len(kc.Clusters) != 1 {
		t.Fatalf("%s: want one cluster (%v)", kubeconfKey, err)
	}
	return kc.Clusters[0].Cluster.Server
}

// grants flattens a ClusterRole into "group/resource" → sorted verbs.
func grants(rules []rbacv1.PolicyRule) map[string][]string {
	g := map[string][]string{}
	for _, r := range rules {
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				k := group + "/" + res
				for _, v := range r.Verbs {
					if !slices.Contains(g[k], v) {
						g[k] = append(g[k], v)
					}
				}
				slices.Sort(g[k])
			}
		}
	}
	return g
}

// TestRBAC: the ClusterRole is read-only except for Events, and binds the
// DaemonSet's service account.
func TestRBAC(t *testing.T) {
	m := loadManifests(t)
	role := one[*rbacv1.ClusterRole](t, m, baseDir+"/clusterrole.yaml")
	read := []string{"list", "watch"} // informers
	event := []string{"create", "patch"}
	want := map[string][]string{
		"/services":                       read,
		"/nodes":                          {"get", "list", "watch"}, // and this Node once at start (NodeCIDR, primary)
		"discovery.k8s.io/endpointslices": read,
		"/events":                         event, // core/v1 only: the recorder writes no events.k8s.io Event
	}
	if diff := cmp.Diff(want, grants(role.Rules)); diff != "" {
		t.Errorf("ClusterRole grants (-want +got):\n%s", diff)
	}
	t.Run("no write verb on services, endpointslices or nodes", func(t *testing.T) {
		for k, verbs := range grants(role.Rules) {
			if strings.HasSuffix(k, "/events") {
				continue
			}
			for _, v := range verbs {
				if !slices.Contains(read, v) && v != "get" {
					t.Errorf("%s: write verb %q", k, v)
				}
			}
		}
	})
	t.Run("no wildcard, resource name or URL", func(t *testing.T) {
		for _, r := range role.Rules {
			if slices.Contains(r.Verbs, "*") || slices.Contains(r.APIGroups, "*") || slices.Contains(r.Resources, "*") ||
				len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
				t.Errorf("rule %+v", r)
			}
		}
		if role.AggregationRule != nil {
			t.Error("aggregation rule")
		}
	})
	t.Run("binding", func(t *testing.T) {
		b := one[*rbacv1.ClusterRoleBinding](t, m, baseDir+"/clusterrolebinding.yaml")
		sa := one[*corev1.ServiceAccount](t, m, baseDir+"/serviceaccount.yaml")
		ds := baseDaemonSet(t, m)
		wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
		if b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}) ||
			!slices.Equal(b.Subjects, wantSubjects) || ds.Spec.Template.Spec.ServiceAccountName != sa.Name ||
			sa.Namespace != ds.Namespace {
			t.Errorf("binding %+v → %+v, service account %s/%s, DaemonSet uses %s/%s",
				b.Subjects, b.RoleRef, sa.Namespace, sa.Name, ds.Namespace, ds.Spec.Template.Spec.ServiceAccountName)
		}
	})
}

// TestCleanupDaemonSets: the migration and rollback one-shots run the
// right --cleanup once per node, privileged in the host network, and stay
// Ready afterwards.
func TestCleanupDaemonSets(t *testing.T) {
	m := loadManifests(t)
	tests := []struct {
		name, file, image, binary string
		hostPaths                 []string // hostPath volumes the init container mounts
	}{
		{"kube-proxy cleanup", migrateDir + "/kube-proxy-cleanup.yaml", cleanupImage, "/usr/local/bin/kube-proxy",
			[]string{"/lib/modules", "/run/xtables.lock"}},
		{"kube-ipvs-proxy cleanup", rollbackDir + "/cleanup-daemonset.yaml", name, binary, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := one[*appsv1.DaemonSet](t, m, tc.file)
			pod := ds.Spec.Template.Spec
			if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
				t.Fatalf("want one init container and one container")
			}
			ic := pod.InitContainers[0]
			if ic.Image != tc.image || len(ic.Command) < 2 || ic.Command[0] != tc.binary || ic.Command[1] != "--cleanup" {
				t.Errorf("init container runs %s %v, want %s %s --cleanup", ic.Image, ic.Command, tc.image, tc.binary)
			}
			if ic.SecurityContext == nil || ic.SecurityContext.Privileged == nil || !*ic.SecurityContext.Privileged {
				t.Error("init container is not privileged")
			}
			if !pod.HostNetwork || pod.PriorityClassName != "system-node-critical" || pod.NodeSelector["kubernetes.io/os"] != "linux" ||
				!slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool { return tl.Operator == corev1.TolerationOpExists && tl.Key == "" }) {
				t.Error("not on every Linux node's host network at node-critical priority")
			}
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Error("mounts a service account token; --cleanup needs no API access")
			}
			if !strings.HasPrefix(pod.Containers[0].Image, "registry.k8s.io/pause:") {
				t.Errorf("main container %s, want pause", pod.Containers[0].Image)
			}
			for _, hp := range tc.hostPaths {
				if !mountsHostPath(pod, ic, hp, hp, hp == "/lib/modules") {
					t.Errorf("init container does not mount %s", hp)
				}
			}
		})
	}
}

// TestKustomizations: every kustomization's resources and patches exist,
// no manifest in a kustomization's directory is left out of it, and every
// image it sets names a container image of what it builds.
func TestKustomizations(t *testing.T) {
	m := loadManifests(t)
	for _, dir := range []string{baseDir, overlayDir, migrateDir, rollbackDir} {
		t.Run(dir, func(t *testing.T) {
			k := one[*kustomization](t, m, dir+"/kustomization.yaml")
			listed := map[string]bool{dir + "/kustomization.yaml": true}
			for _, r := range k.Resources {
				p := path.Clean(dir + "/" + r)
				if fi, err := os.Stat(p); err != nil {
					t.Errorf("resource %s: %v", r, err)
				} else if fi.IsDir() {
					if _, err := os.Stat(p + "/kustomization.yaml"); err != nil {
						t.Errorf("resource %s: not a kustomization: %v", r, err)
					}
				}
				listed[p] = true
			}
			for _, pt := range k.Patches {
				p := path.Clean(dir + "/" + pt.Path)
				if _, ok := m.files[p]; !ok {
					t.Errorf("patch %s: no such manifest", pt.Path)
				}
				listed[p] = true
			}
			for _, p := range m.paths() {
				if path.Dir(p) == dir && !listed[p] {
					t.Errorf("%s is in %s but not in its kustomization", p, dir)
				}
			}
			if k.Namespace != "" && k.Namespace != namespace {
				t.Errorf("namespace %s, want %s", k.Namespace, namespace)
			}
			images := containerImages(m, dir, k)
			for _, im := range k.Images {
				if !slices.Contains(images, im.Name) {
					t.Errorf("images: %s names no container image of %s (%v)", im.Name, dir, images)
				}
			}
		})
	}
}

// containerImages lists the container images of the DaemonSets a
// kustomization builds, before its image transformations.
func containerImages(m *manifests, dir string, k *kustomization) []string {
	var out []string
	for _, r := range k.Resources {
		p := path.Clean(dir + "/" + r)
		if sub, ok := m.files[p+"/kustomization.yaml"]; ok {
			out = append(out, containerImages(m, p, sub[0].obj.(*kustomization))...)
			continue
		}
		for _, o := range m.files[p] {
			if ds, ok := o.obj.(*appsv1.DaemonSet); ok {
				for _, c := range append(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers...) {
					out = append(out, c.Image)
				}
			}
		}
	}
	return out
}

// TestRollbackUsesTheOverlayImage: the rollback cleanup runs the image the
// example overlay deploys.
func TestRollbackUsesTheOverlayImage(t *testing.T) {
	m := loadManifests(t)
	over := one[*kustomization](t, m, overlayDir+"/kustomization.yaml")
	rb := one[*kustomization](t, m, rollbackDir+"/kustomization.yaml")
	if !slices.Equal(over.Images, rb.Images) || len(over.Images) != 1 || over.Images[0].Name != name {
		t.Errorf("rollback images %+v, overlay images %+v: want the same single %s image", rb.Images, over.Images, name)
	}
}
