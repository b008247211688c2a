// Package vme2e is the end-to-end test of the real mode: the proxy runs,
// as the DaemonSet would, inside a VM lab (package integration/labnet,
// hack/vmlab/run.sh) with the kernel data plane, and watches a real
// kube-apiserver and etcd (package integration/apiserver) running on the
// host. qemu's user networking (VMLAB_NET=user) lets the guest reach the
// host's loopback listener at 10.0.2.2.
//
// Two halves share the package:
//   - host.go's StartHost starts the apiserver (serving cert valid for
//     10.0.2.2), applies deploy/base's RBAC, writes the proxy's
//     ServiceAccount kubeconfig and an admin kubeconfig that point at
//     https://10.0.2.2:<port>; Host.RunVM boots a package in the VM with
//     them (hack/demo uses both too). host_test.go (built without the
//     integration tag) does that for this package's VM half; it skips
//     unless KIP_VME2E=1, so that `go test ./...` boots no VM.
//   - guestnet.go's BringUpNetwork (integration tag) configures the
//     guest's lo and eth0.
//   - vm_test.go (integration tag, run in the VM) brings up eth0, builds
//     two pods with echo servers, creates a Node, a Service and an
//     EndpointSlice through the API, runs app.Run in the real mode and
//     checks that traffic to the ClusterIP follows the EndpointSlice,
//     that the node's own connections to a LoadBalancer are held to its
//     source ranges (sourceranges_test.go), that another Node's address
//     used as an external IP is served but never bound on kube-ipvs0
//     (nodeaddr_test.go), that /healthz and /metrics answer, that the
//     rollback's one-shot on a node without kube-proxy's rules keeps our
//     table, exits 0 and records a Node Event (handback_test.go), and
//     that --cleanup removes everything. It skips when the kubeconfigs
//     are not passed in.
//
// Run it with `KIP_VME2E=1 go test -v -timeout 20m ./integration/vme2e/`
// (make vm-e2e); the apiserver binaries come from hack/k8s/build.sh (make apiserver).
package vme2e
