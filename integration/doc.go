// Package integration holds the real-kernel tests, run inside the VM lab
// (build tag integration): hack/vmlab/run.sh builds each test package
// below into a static binary with `go test -c -tags integration`, boots
// it in a throwaway qemu VM running Debian's cloud kernel (IPVS,
// nftables, veth, dummy) and reports the result from the serial console.
// Run them with `make integration` or
// `hack/vmlab/run.sh ./integration/... -- -test.v`. This package itself
// holds no code; the subpackages are:
//
//   - ipvswriter: the IPVS writer (proxier/ipvs) against the kernel.
//   - nftwriter: the nftables writer (nft) against the kernel, and its
//     rejecting rules on real traffic.
//   - traffic: real TCP and UDP traffic through proxier.DataPlane in a
//     small multi-node topology of network namespaces.
//   - bench: data-plane benchmarks (`make bench-vm`).
//   - labnet: the lab plumbing the tests share (namespaces with a locked
//     worker thread, veth pods, links, sysctls, echo servers, dialers).
//   - labmain: the TestMain gate of every VM test package.
//   - apiserver: runs on the host, not in the VM (a real kube-apiserver).
//
// These tests program the kernel for real: they create links, network
// namespaces, IPVS services and nftables tables, and write /proc/sys. They
// must never touch the host. They therefore refuse to run (labmain's
// TestMain skips the whole package) unless KIP_VMLAB=1 is set, which only
// the VM's /init does; do not set it by hand, and do not add tests that
// bypass TestMain. Tests may assume they are root in a fresh VM, that each
// test binary runs once, and that no other process touches the network
// stack, but they should still clean up what they create so later tests
// in the same boot start clean.
package integration
