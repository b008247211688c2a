// Package hostaddrs holds the VM lab tests of package proxier/hostaddr:
// the node's addresses read and watched over a real kernel's rtnetlink,
// with the IPVS dummy interface's addresses (a VIP per service) left out
// of both. Its test files carry the integration build tag and run only in
// the VM lab (hack/vmlab/run.sh).
package hostaddrs
