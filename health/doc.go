// Package health owns the node agent's HTTP health endpoints, with
// kube-proxy's semantics and bodies so that probes, load balancers and
// scripts written for kube-proxy keep working:
//
//   - ProxyHealth is the --healthz-bind-address server (default
//     0.0.0.0:10256). /livez answers 503 when an update has been queued
//     (QueuedUpdate) and not applied (Updated) within 2 × the sync period,
//     kube-proxy's healthTimeout. The first sync counts as queued from the
//     process start (NewProxyHealth): a proxy that has not applied a sync
//     2 × the sync period after it started answers 503. /healthz
//     additionally answers 503 while the Node is being deleted or carries
//     the ToBeDeletedByClusterAutoscaler taint (SyncNode). Bodies are
//     kube-proxy's JSON (lastUpdated, currentTime, nodeEligible on /healthz
//     only, healthy, status).
//   - ServiceHealth runs one HTTP server per Service with a
//     healthCheckNodePort (externalTrafficPolicy: Local), answering 200 only
//     while the Service has local ready endpoints and the proxy is healthy,
//     with kube-proxy's X-Load-Balancing-Endpoint-Weight header and JSON
//     body (service.namespace, service.name, localEndpoints,
//     serviceProxyHealthy).
//
// The sync loop drives both through the proxier.Health and
// proxier.ServiceHealth seams; this package implements those methods
// without importing package proxier. The compile-time checks are on this
// side, against copies of the two interfaces (service_test.go), and in
// cmd/kube-ipvs-proxy/app, which passes both to proxier.Config. The
// servers' listen-serve-shutdown lifecycle is internal/httpserve's.
//
// health must not import package proxier, client-go informers or clients
// (it reads only the *corev1.Node it is given), kernel libraries (netlink,
// nftables, ipvs), or Prometheus: probe counts reach the metrics package
// through the small ProbeObserver interface.
package health
