// Package proxier will own the node agent's loop: informers on Services,
// EndpointSlices and Nodes feed the policy engine's incremental API, and
// each sync turns the changed part of the Plan into IPVS virtual servers
// and destinations (github.com/moby/ipvs) and VIP addresses on the
// kube-ipvs0 dummy interface (netlink), draining removed backends
// gracefully. It will also serve health, metrics and healthCheckNodePorts.
//
// Not yet implemented: it arrives with the data plane and control plane
// issues. Kernel libraries will be imported only by its IPVS writer, behind
// a small interface with a kernel-faithful fake. It must make no policy
// decisions: those live in package policy.
package proxier
