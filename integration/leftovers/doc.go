// Package leftovers tests, in the VM lab, that the proxy removes what
// upstream kube-proxy's IPVS mode leaves on a node (package
// proxier/leftovers): its chains as iptables-nft writes them and its
// ipsets, made here by Debian's own iptables and ipset binaries (staged
// into the VM by `make integration`; the proxy itself never runs them),
// while the kubelet's chains, other chains and other ipsets stay. With
// iptables-legacy rules holding an ipset, it reports the ipset as stuck
// and names the legacy tables. And that the handback's wait
// (KubeProxyServesOnHost) recognises kube-proxy's rules in each form it
// writes them: iptables-nft, iptables-legacy (read from x_tables with
// getsockopt, counted as iptables-legacy lists them) and its nftables
// mode's tables, each only once its rules are filled.
package leftovers
