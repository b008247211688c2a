// Package manifest owns decoding the object files given to
// `kube-ipvs-proxy --dry-run --objects PATH`: multi-document YAML, single or
// concatenated JSON objects, and `kind: List` documents are decoded into the
// k8s.io/api types for Services, EndpointSlices and Nodes. Fatal problems with
// a file are reported as *ParseError carrying "file: line: message"; problems
// with a single object skip that object and are reported as a Warning with its
// file:line source. The package does no Kubernetes semantics beyond decoding
// (plus kubectl's default namespace); validation belongs elsewhere.
//
// This package must not import client-go, the policy/ package, or any kernel
// library (netlink, ipvs, nftables, ...): it is pure file decoding.
package manifest
