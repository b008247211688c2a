// Package kubeclient is the proxy's client of the Kubernetes API: what
// the proxy reads and writes there, and nothing else. It lists and
// watches Services, EndpointSlices and Nodes, reads one Node, and writes
// Events, over client-go's REST client (k8s.io/client-go/rest) with a
// scheme of its own that holds only core/v1 and discovery/v1.
//
// Why not client-go's Clientset: k8s.io/client-go/kubernetes, and
// every typed client and informer package, imports
// k8s.io/client-go/kubernetes/scheme, which registers every built-in API
// group when the process starts. That costs resident memory on every
// node for groups the proxy never reads (benchmarks/NOTES.md, Memory, says how
// much), and the binary carries their clients, informers and apply
// configurations. The requests are the typed clients' own: the same
// paths, list options, watch-list semantics, content types and event
// writes (CreateWithEventNamespace and its kin), and one HTTP client and
// rate limiter shared by both API groups, as a Clientset shares them.
//
// Tests that run the proxy over client-go's fake clientset adapt it with
// internal/testsupport/fakeapi. The REST path has unit tests over an
// httptest API server of this package's own (lists, content negotiation,
// watches and bookmarks, a 410 Gone relisted through an informer, Node
// reads, Event writes, the shared rate limiter, the timeouts), and is
// exercised against a real apiserver (integration/e2e) and in the lab
// cluster.
package kubeclient
