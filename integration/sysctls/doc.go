// Package sysctls holds the VM lab tests of package conntrack: kube-proxy's
// conntrack settings written to a real kernel's netfilter sysctls, once
// nf_conntrack is loaded (by our nftables table, as in the proxy), and not
// written again when they hold. Its test files carry the integration build
// tag and run only in the VM lab (hack/vmlab/run.sh).
package sysctls
