// Package deploy holds the manifests that replace kube-proxy with
// kube-ipvs-proxy on a kubeadm cluster: a kustomize base (ServiceAccount,
// read-only ClusterRole and its binding, a ConfigMap with a
// KubeProxyConfiguration, and a DaemonSet shaped like kubeadm's kube-proxy),
// an example overlay, and the one-shot cleanup DaemonSets for the migration
// (migrate/) and the rollback (rollback/). See README.md.
//
// The Go code is only their test: every YAML file decodes strictly into its
// Kubernetes type, the kustomizations resolve (and build, when kubectl is on
// PATH), the DaemonSet, RBAC and configuration keep the shape the README
// promises, and a real kube-apiserver (integration/apiserver, when built)
// accepts them and authorizes exactly what the README says. It must not
// import the command or the proxy's packages: the manifests are checked as
// an operator would read them, not against the code's own constants.
package deploy
