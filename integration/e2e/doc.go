// Package e2e holds the end-to-end tests of the control plane against a
// real kube-apiserver and etcd (package integration/apiserver), on the
// host: the command's own Watch runs with the ServiceAccount and RBAC of
// deploy/base, and a recording data plane stands in for the kernel (the
// kernel path is proven in the VM lab). The tests skip when the
// apiserver binaries are not built; `make e2e` builds them.
package e2e
