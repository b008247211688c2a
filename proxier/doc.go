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
// One Service, from the informer to the IPVS call, in eight files:
//
//  1. proxier/informers.go: the informer's handler (onConvertedService)
//     gets the Service already converted to a policy.Service by its
//     transform (transform.go, package kubeapi) and
//  2. proxier/tracker.go: applyService hands it to the engine
//     (Engine.UpsertService) and marks it dirty; the runner calls
//  3. proxier/sync.go: sync checks out the dirty services
//     (tracker.checkout, which asks
//  4. policy/engine.go: ComputeService, whose virtual servers and
//     destinations policy/compute.go selects) and applies the services
//     whose plan changed (syncState.update), through
//  5. proxier/dataplane.go: DataPlane.Apply, the nftables writer first
//     (nft/writer.go), then
//  6. proxier/ipvs/writer.go: Writer.Apply, which builds
//  7. proxier/ipvs/batch.go: a batch: the service's plan translated into
//     kernel form, claimed, diffed against the mirror and run as ordered
//     steps, each a call of the Kernel interface, which
//  8. proxier/ipvs/kernel_linux.go turns into netlink (github.com/moby/ipvs).
//
// A full resync takes the same path with every service (Resync and
// Plan.ByService for Apply). Both writers meet one contract, kernelWriter
// (dataplane.go): Apply, Resync, NeedsResync, Check, the sliced repair
// and Cleanup.
//
// proxier must not import kernel libraries itself (only its writer
// subpackages do) nor make policy decisions, and it never flushes the
// kernel: not on exit, not while the apiserver is unreachable.
package proxier
