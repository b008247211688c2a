// Package conntrack applies kube-proxy's conntrack settings (the
// KubeProxyConfiguration's conntrack section, --conntrack-*) to the
// node's netfilter sysctls, as kube-proxy does at startup in every mode,
// IPVS included: nf_conntrack_max (scaled by the CPU count, with the
// hash table grown to a quarter of it), the TCP established and
// CLOSE_WAIT timeouts, tcp_be_liberal and the UDP timeouts. A node that
// replaces kube-proxy keeps the same conntrack tuning; upstream's e2e
// suite checks the CLOSE_WAIT timeout.
//
// Each value is written only when it differs from the kernel's, so a
// restart changes nothing. The files are reached through sysctl.Files
// (package internal/sysctl, the IPVS writer's seam too): the real one
// is /proc/sys and /sys, a map in tests.
//
// conntrack decides nothing about services and knows nothing of the
// plan, the writers or the API.
package conntrack
