// Package apiconv converts Kubernetes API objects (k8s.io/api Services,
// discovery/v1 EndpointSlices and Nodes) into the policy engine's
// validated inputs.
//
// It owns validation: an object with a field the engine cannot use comes
// back as a *policy.ObjectError naming the object and the field, wrapping
// policy.ErrInvalid; a Service this proxy deliberately ignores (headless,
// ExternalName, another proxy's, no cluster IP yet) wraps
// policy.ErrNotProxied. A Service's external and load-balancer IPs and
// source ranges are normalised (addresses.go): parsed as kube-proxy parses
// them, canonical, each kept once, without the addresses no Service may
// take; a bad one is left out with a warning in Service.Warnings, the rest
// of the Service kept. An endpoint on such an address is left out too
// (EndpointSlice.Warnings). It applies the API's defaults (nil conditions,
// nil protocols, the default affinity timeout) so the engine never sees a
// nil. A Service it does not convert still holds its ClusterIPs
// (HeldClusterIPs, claims.go), which the engine keeps from other
// Services.
//
// It also owns trimming (trim.go): an Interner's Trim functions keep of
// each object only what the converters read, sharing equal strings and
// read-only parts between objects, for the informers' caches. Converting
// a trimmed object gives what converting the original gives.
//
// apiconv is pure: no I/O, no logging, no client-go, no kernel libraries.
package apiconv
