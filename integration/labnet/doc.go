// Package labnet is the test-lab plumbing shared by the VM lab's test
// packages (integration/ipvswriter, integration/nftwriter,
// integration/traffic): network namespaces with a worker thread locked
// into each (Host), pods wired to the root namespace by veth pairs (Pod),
// links, addresses and sysctls, echo servers that answer
// "<name> peer=<address they saw>" (Echo), and the dialers that read
// those answers and classify failures (Exchange, Greet, IsFastFailure,
// IsTimeout), and the UDP conntrack flows counted (CountUDPFlows).
//
// Everything but this file carries the integration build tag: the
// package reconfigures the network stack of whatever runs it, so it is
// built only into the VM lab's test binaries (hack/vmlab/run.sh) and
// never runs on the host. Importing it does nothing; only calls do.
//
// It is lab plumbing, not the product: it must not import proxier, nft
// or policy, so that the tests check the data plane with tools that do
// not share its code.
package labnet
