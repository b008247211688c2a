// Package proxier is the node agent's control loop and data plane
// composition. Proxier (loop.go) watches Services, discovery/v1
// EndpointSlices and every Node, this node's whole and the others for
// their addresses (informers.go, whose transform converts each object
// once with package apiconv; nodeaddrs.go), plus a metadata-only
// informer over all Nodes while some Service uses
// kube-ipvs-proxy.io/topology-keys (nodes.go). Handlers feed the
// converted objects into one policy.Engine and mark only the services
// they affect (tracker.go). A bounded-frequency runner (runner.go) syncs
// at most once per MinSyncPeriod and at least once per SyncPeriod: a sync
// recomputes the dirty services and applies those whose virtual servers
// changed, or resyncs the whole plan first, after a failure or when the
// writer asks (sync.go). The periodic resync repairs kernel drift against
// what was last programmed, without recomputing the plan, in slices
// between which queued changes are applied, so none waits behind it
// (repair.go). Faults stay where they happen (faults.go): a failure
// confined to one service is counted, logged, put as an Event on the
// Service and retried with that service's backoff while the sync
// succeeds; a failed sync is retried with the runner's backoff from 1 s;
// while idle the loop checks cheaply that our kernel objects still exist
// and resyncs at once if not. Events on invalid annotations: events.go;
// the seams to the data plane (one interface, DataPlaneWriter), metrics
// and health: seams.go.
//
// DataPlane (dataplane.go) applies plans to the kernel through the IPVS
// writer (package proxier/ipvs) and the nftables writer (package nft); it
// only orders the calls and joins their errors. The two writers are
// placed apart on purpose: nft/ is the rule set as well as its writer,
// and the rule set is read outside this loop (the dry run and the
// preflight print nft.Render's text and read the node's forward chains,
// the handback and --cleanup remove the table), so it stands at the top
// beside policy/; the IPVS writer has no reader but this loop and
// --cleanup, so it lives under proxier/. After a sync that changed
// the UDP services' serving endpoints, the loop has it delete the stale
// UDP conntrack flows, as kube-proxy's conntrack reconciler
// (conntrack.go; the rules are policy's, the walk package
// proxier/udpflows's).
//
// # One Service, from the informer to the IPVS call
//
// Eight files. Each step names, in parentheses, the functions to read in
// its file; calls into other packages (apiconv, policy, nft) and into
// helper files are named where they are made, and can be taken on trust
// on a first reading. TestTraceMatchesTheCode checks every file and
// function named here, and that each step's first function is used where
// the step before says.
//
//  1. proxier/informers.go (Proxier.transform, Proxier.onConvertedService):
//     the Services informer's transform converts each Service once into a
//     policy.Service (apiconv.Service, apiconv/service.go), and the
//     handler gets the converted Service;
//  2. proxier/tracker.go (tracker.applyService): it hands the Service to
//     the engine (Engine.UpsertService, policy/engine.go) and marks it
//     dirty; Proxier.queued (loop.go) then asks the runner for a sync;
//  3. proxier/runner.go (runner.Loop, runner.call): the runner calls its
//     function, Proxier.syncOnce (set in loop.go), at most once per
//     MinSyncPeriod and at least once per SyncPeriod;
//  4. proxier/sync.go (Proxier.syncOnce, Proxier.sync): the sync checks
//     out the dirty services (tracker.checkout, which recomputes them with
//     Engine.ComputeService: policy/engine.go, policy/compute.go), keeps
//     those whose virtual servers changed (syncState.update) and passes
//     them to
//  5. proxier/dataplane.go (DataPlane.Apply): the nftables writer first
//     (nft/writer.go), then
//  6. proxier/ipvs/writer.go (Writer.Apply): the IPVS writer, which
//     builds one batch for the changes;
//  7. proxier/ipvs/batch.go (batch.service, batch.plan): each service's
//     plan is translated into kernel form and claimed (Writer.setDesired,
//     proxier/ipvs/desired.go) and diffed against the mirror of the
//     kernel into ordered actions by the pure reconciler (reconcileVS,
//     reconcileAddr: proxier/ipvs/reconcile.go); the executor (batch.run,
//     proxier/ipvs/execute.go) runs them phase by phase: the ClusterIP and
//     other VIPs bound on kube-ipvs0 first (one Links.AddAddrs), then the
//     IPVS adds, updates and prunes, each phase's changes in chunks of up
//     to writeChunk (1,024), one Kernel.Write each, whose answers it
//     applies to the mirror (the adds run as each chunk is planned), and
//     last the addresses no longer used unbound; on Linux a Write is
//  8. proxier/ipvs/ipvsnl/conn_linux.go (Conn.Write, opWriter.write): the
//     changes encoded as IPVS generic netlink requests
//     (proxier/ipvs/ipvsnl/encode.go) and sent in as few sendmsg calls as
//     the socket buffers allow.
//
// A full resync takes the same path with every service (Resync, each
// service's group of Plan.Services as Apply would take it). Both writers
// meet one contract, kernelWriter (dataplane.go): Apply, Resync,
// NeedsResync, Check, the sliced repair and Cleanup.
//
// proxier must not import kernel libraries itself (only its writer
// subpackages do) nor make policy decisions, and it never flushes the
// kernel: not on exit, not while the apiserver is unreachable.
package proxier
