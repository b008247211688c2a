// Package ipvswriter holds the VM lab tests of the IPVS writer
// (proxier/ipvs) against a real kernel: programming and reading back
// virtual servers, destinations and kube-ipvs0 addresses, adoption on
// restart, drift repair, ownership of foreign virtual servers, Cleanup,
// graceful draining of a live TCP connection, and UDP removal with its
// conntrack entries. The tests carry the integration build tag and run
// only in the VM (hack/vmlab/run.sh ./integration/ipvswriter/).
package ipvswriter
