// Package httpserve owns serving one HTTP handler on one address for as
// long as a context lives, then shutting the server down gracefully: the
// lifecycle shared by the --healthz-bind-address server (package health)
// and the --metrics-bind-address server (package metrics), and the
// timeouts every server of the node agent uses.
//
// It knows nothing of the routes it serves. The shared test of such a
// server (serve, get, cancel, nil) is test support:
// internal/testsupport/httpservetest. httpserve must not import any
// package of this module, client-go, Prometheus or kernel libraries: it
// is net/http only, so that both servers can use it without a cycle.
package httpserve
