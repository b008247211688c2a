// Package policy is the pure decision engine of kube-ipvs-proxy.
//
// From Services, EndpointSlices and Nodes (k8s.io/api types, converted once
// into a validated model) it computes this node's Plan: every IPVS virtual
// server (VIP:port/protocol) with its scheduler, persistence and weighted
// destinations, and a one-line reason for the choice. It implements
// kube-proxy's endpoint selection (CategorizeEndpoints: traffic policies,
// topology hints and their safeguards, the terminating fallbacks) and the
// project's extensions: the PreferLocal and PreferZone traffic policies,
// ordered topology keys and priority tiers with overprovisioning spill.
//
// The Engine is an index: recomputing one service costs O(that service's
// endpoints), which is what the control plane calls on every change.
//
// policy owns no I/O. It must not import client-go, netlink, nftables, ipvs,
// klog or prometheus, and it does not log: problems come back as Warnings
// and errors that name the object and field, and choices come back as
// reasons.
package policy
