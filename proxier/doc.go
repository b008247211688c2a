// Package proxier owns the node agent's data plane composition: DataPlane
// applies the policy engine's plans to the kernel through the IPVS writer
// (package proxier/ipvs: virtual servers, destinations, the kube-ipvs0
// dummy interface, sysctls) and the nftables writer (package nft: one
// table for NOTRACK, masquerade, hairpin, reject and filtering).
//
// It translates nothing and decides nothing: both writers take the same
// Plan or per-service changes, and DataPlane only orders the calls and
// joins their errors. The informer-driven sync loop, health, metrics and
// healthCheckNodePorts arrive with the control plane.
//
// proxier must not import kernel libraries itself (only its writer
// subpackages do) nor make policy decisions.
package proxier
