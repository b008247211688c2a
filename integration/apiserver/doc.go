// Package apiserver starts a real kube-apiserver (k8s.io/kubernetes v1.36.3)
// backed by an embedded etcd as child processes on loopback, for end-to-end
// tests that run on the host (not in the VM lab).
//
//	c := apiserver.Start(t, apiserver.Options{})
//	cs := kubernetes.NewForConfigOrDie(c.AdminConfig())
//	kubeconfig := c.Kubeconfig("admin")
//
// The binaries come from the separate module hack/k8s and are built by
// `hack/k8s/build.sh kube-apiserver etcd` (make apiserver) into
// .cache/k8s/bin (a cold build takes minutes). Start skips the test when they are missing, unless
// KIP_APISERVER_BUILD=1, which makes it build them. See README.md.
//
// There is no kube-controller-manager: nothing creates default service
// accounts, EndpointSlices for Services, or finalizes namespace deletion.
// Tests write the objects they need, which is what a proxy test wants.
//
// This package is test support: only _test.go files may import it (it
// takes testing.TB and execs binaries). It must not import anything of
// kube-ipvs-proxy's own, so every package's tests can use it.
package apiserver
