// Package dashboard holds the metrics the kubernetes-mixin kube-proxy
// dashboard queries, for the tests that check a live proxy's /metrics
// against it: integration/e2e against a real kube-apiserver, and
// integration/vme2e with the proxy in the VM lab. It imports nothing of
// the proxy's.
package dashboard
