// Package proxier is the node agent's control loop and data plane
// composition. Proxier (loop.go) watches Services, discovery/v1
// EndpointSlices and this node's Node, plus a metadata-only informer over
// all Nodes while some Service uses kube-ipvs-proxy.io/topology-keys
// (nodes.go). Handlers convert objects with package kubeapi into one
// policy.Engine and mark only the services they affect (tracker.go). A
// bounded-frequency runner (runner.go) syncs at most once per
// MinSyncPeriod and at least once per SyncPeriod: a sync recomputes the
// dirty services and applies those whose virtual servers changed, or
// resyncs the whole plan first, after a failure or when the writer asks
// (sync.go). The periodic resync repairs kernel drift against what was
// last programmed, without recomputing the plan, in slices between which
// queued changes are applied, so none waits behind it (repair.go). Faults stay where they happen (faults.go): a
// failure confined to one service is counted, logged, put as an Event on
// the Service and retried with that service's backoff while the sync
// succeeds; a failed sync is retried with backoff from 1 s; while idle
// the loop checks cheaply that our kernel objects still exist and
// resyncs at once if not. Events on invalid annotations: events.go; the
// seams to the data plane, metrics and health: seams.go.
//
// DataPlane applies plans to the kernel through the IPVS writer (package
// proxier/ipvs) and the nftables writer (package nft); it only orders the
// calls and joins their errors.
//
// proxier must not import kernel libraries itself (only its writer
// subpackages do) nor make policy decisions, and it never flushes the
// kernel: not on exit, not while the apiserver is unreachable.
package proxier
