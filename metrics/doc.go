// Package metrics owns the node agent's Prometheus metrics and the
// --metrics-bind-address server (default 127.0.0.1:10249).
//
// It exports kube-proxy's metrics under kube-proxy's exact names, help
// texts (with component-base's "[ALPHA] " prefix, as kube-proxy's /metrics
// shows them), types, buckets and labels, so that dashboards and alerts
// written for kube-proxy keep working: kubeproxy_sync_proxy_rules_*,
// kubeproxy_network_programming_duration_seconds,
// kubeproxy_proxy_healthz_total / _livez_total and the conntrack
// reconciler's kubeproxy_conntrack_reconciler_sync_duration_seconds and
// _deleted_entries_total (always with ip_family, as kube-proxy's have had
// it since they appeared). Given the IP families the
// proxy serves, the per-family metrics carry kube-proxy ≥ 1.33's ip_family
// label; without, they have kube-proxy ≤ 1.32's label set. Its own metrics
// are under kube_ipvs_proxy_: netlink_ops_total{kind,result},
// draining_destinations, virtual_servers{kind},
// service_sync_errors_total{reason} (failures confined to one service)
// and failing_services (services retried with backoff).
//
// There are no globals: New registers everything on the Registerer it is
// given, and *Metrics implements the sync loop's proxier.Observer seam
// (and health.ProbeObserver) without importing either package. Serve
// serves /metrics, kube-proxy's /proxyMode ("ipvs") and /healthz ("ok",
// the API server's healthz handler with its ping check, as kube-proxy
// installs it); the one exception to no globals is that handler's
// observation of each check in component-base's health-check SLIs
// (slis.Registry, served on /metrics/slis by the caller), as there.
//
// metrics must not import package proxier, client-go informers or clients,
// or kernel libraries (netlink, nftables, ipvs); it only counts what it is
// told.
package metrics
