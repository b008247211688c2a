// Package hostaddr lists this host's interface addresses and reports
// their changes, for the NodePort addresses and the node-address rule of
// the policy engine (kube-proxy's IPVS mode serves NodePorts on every
// local address). It owns reading rtnetlink addresses and subscribing to
// their changes; it decides nothing about which addresses to use beyond
// the host-level exclusions kube-proxy makes (the dummy interface,
// loopback, IPv6 link-local), and it never writes to the kernel.
//
// Only the proxy's real mode uses it; the rest of the proxier sees it
// through the proxier.HostAddresses seam.
package hostaddr
