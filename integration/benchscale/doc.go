// Package benchscale is `make bench-scale`: the proxy binary
// built from the working tree, in its real mode inside the VM lab, against
// a real kube-apiserver on the host that holds thousands of Services, and
// what it costs at that scale: time to converge, CPU, memory, IPVS
// operations, and the latency of changes from the API write to the
// kernel. It changes no proxy code and reads the proxy only from outside
// (its process in /proc, its /livez and /metrics, the kernel), so that any two
// commits can be measured alike: KIP_BENCH_SCALE_BASE=<rev> builds a
// second binary from that revision and measures both in the same VM boot,
// interleaved, the base first in odd rounds and the tree in even ones.
//
// Two halves, as in package vme2e, whose Host they use:
//   - host_test.go (no integration tag; skips unless KIP_BENCH_SCALE=1)
//     builds the binaries, and per scale starts an apiserver, loads the
//     workload (workload.go) through the API (above 10,000 services, once:
//     seed_test.go keeps the loaded etcd and later runs start from it) and
//     boots the VM; it collects
//     the runs the VM prints (result.go) and writes one table per scale to
//     stdout and .cache/bench-scale/<time>.{md,json} (the JSON's schema is
//     package results, which hack/benchplot reads the committed files with).
//   - vm_test.go and phases_test.go (integration tag, in the VM) run each
//     binary as its own process with the DaemonSet's command line and
//     deploy/base's config file (minSyncPeriod 0s, syncPeriod 30s as
//     written there today), and measure, in order: a cold start (clean
//     kernel) until kube_ipvs_proxy_virtual_servers adds up to the
//     workload after a sync (/livez, cheap, is asked every 100 ms until
//     it says a sync was applied; only then /metrics, whose scrape costs
//     the proxy far more), then the kernel is checked (every virtual
//     server and destination, the addresses on kube-ipvs0) and RSS is
//     read once a second for 15 s, the last reading being the memory
//     "after convergence, settled" (the proxy returns the heap its first
//     sync freed to the OS only after that sync); an idle
//     window (periodic resyncs only; RSS read once a second, its most
//     above the window's start being what the repairs add); sequential endpoint changes, each
//     waited for in IPVS; a burst of changes written at once; services
//     created and deleted one at a time; churn (20 endpoint changes a
//     second for 60 s, each seen reaching IPVS, and the proxy's
//     kubeproxy_network_programming_duration_seconds over it); memory at
//     once, then read as after the cold start ("after churn, settled":
//     the proxy returns a burst's heap once its loop has been quiet a
//     few seconds); a restart (SIGTERM, a new process against the programmed kernel);
//     --cleanup, which must leave nothing; then the floors: the table the
//     cold start programmed, programmed again into a fresh network
//     namespace by moby/ipvs and netlink alone, one request each, and by
//     the tree's IPVS writer alone, and by a minimal batched writer
//     (batchfloor_test.go: its own encoders on mdlayher/netlink, many
//     requests per sendmsg, only each batch's last acknowledged), the
//     kernel's floor once the one request and one wait per operation are
//     gone (the cold start's ratio to them is the cold-start target of
//     BENCHMARKS.md). A fresh namespace, because IPVS keeps deleted
//     destinations in a trash list for two to four minutes and every
//     destination added searches it; for the same reason a run after the
//     first in a boot waits for the trash to empty before its cold start.
//     With KIP_BENCH_SCALE_PROFILE=1 each start (cold, restart) is also
//     CPU-profiled in 2 s windows until its CPU is read, after the kernel
//     check (the windows from its convergence on profile what the proxy
//     does right after its first sync), and its log's milestones are
//     printed (process start → "Starting the proxy" → informer caches
//     synced). Each start's first sync is split from the proxy's log
//     (firstSyncParts): when the caches were synced and the first sync
//     done, from the process start, and that sync's time in computing the
//     plan, in nftables and in IPVS ("First sync done" gives each
//     writer's). Each start also logs its CPU at convergence beside the
//     CPU read after the kernel check, and the proxy's log lines since
//     convergence; an endpoint change that takes over a second has the
//     proxy's log over it printed; after the restart the harness times one
//     read of /proc/net/ip_vs as the proxy's idle check reads it (bytes,
//     reads: a short one says the listing strayed into another network
//     namespace's virtual servers) beside one dump of the virtual servers.
//
// make bench-vs-kube-proxy (vskubeproxy_test.go, vskubeproxy_host_test.go)
// is a second comparison on the same workload and host half: upstream
// kube-proxy v1.36.3 (.cache/k8s/bin, hack/k8s/build.sh) in IPVS mode and
// ours, one after the other in one boot (kube-proxy first in odd rounds,
// ours in even), each from process start on a clean kernel with an empty
// IPVS trash, both given deploy/base's config file with the NodePort
// addresses named. Both are observed alike from outside: when IPVS
// holds every virtual server and destination of the workload ("IPVS
// table complete", tablecheck_test.go: the virtual servers counted by a
// generic netlink dump, then, once all are there, the destinations by
// /proc/net/ip_vs, whose read costs the square of the table; past 30,000
// virtual servers, by one dump of destinations per virtual server as it
// appears) and the process's CPU time then; its
// own first sync (the end of the first sync both count in kube-proxy's
// kubeproxy_sync_proxy_rules_* metrics, read once the table is complete); RSS 15 s after that sync; and Changes endpoint changes, each
// timed from the API write until IPVS holds it. iptables-nft and ipset
// are staged into the VM (IPv4 only: kube-proxy then runs one proxier);
// between runs kube-proxy's --cleanup and ours remove what each made.
// Beside our run, the two floors are measured on the table it programmed.
//
// The workload: N Services (default 1,000 and 10,000) in 10 namespaces,
// each with port 80/TCP and 10 ready endpoints in one EndpointSlice; one
// in ten also 53/UDP, one in ten a NodePort, one in a hundred with an
// endpoint on this node. The apiserver's own kubernetes Service is
// programmed too.
//
// Knobs (environment; the Makefile passes SERVICES, BASE and ROUNDS):
// KIP_BENCH_SCALE_SERVICES ("1000 10000"), KIP_BENCH_SCALE_BASE (a git
// revision or a binary), KIP_BENCH_SCALE_ROUNDS (1),
// KIP_BENCH_SCALE_IDLE (seconds, 65), KIP_BENCH_SCALE_CHANGES (100),
// KIP_BENCH_SCALE_BURST (500), KIP_BENCH_SCALE_NEW_SERVICES (50),
// KIP_BENCH_SCALE_CHURN_RATE (20), KIP_BENCH_SCALE_CHURN_SECONDS (60) and
// KIP_BENCH_SCALE_PROFILE (1: enableProfiling, the proxy's heap profiles
// after the cold start and at the end, and its CPU profile windows of
// each start, of the services' creates and deletes and of the churn,
// written next to the console log; the harness's own CPU profile of those
// two phases is written in every run, as harness-<proxy>),
// KIP_BENCH_SCALE_FIRST_SYNC_WAIT (make bench-vs-kube-proxy: seconds to
// wait for a proxy's own first sync once its table is complete, 0 for no
// bound; past it the wait is reported as a lower bound),
// KIP_BENCH_SCALE_TABLE_WAIT (make bench-vs-kube-proxy: seconds to wait
// for a proxy's IPVS table from its start, 0 for the default bound of 5
// minutes and 100 ms per service, past which the run fails; past a set
// wait the table's time, the CPU and the peak RSS by then are reported
// as lower bounds); and
// hack/vmlab/run.sh's VMLAB_MEM (4096 here up to 10,000
// services, 1024 more per further 10,000), VMLAB_SMP, VMLAB_TIMEOUT
// and VMLAB_LOG (default .cache/bench-scale/<time>-<N>.console.log).
//
// Under TCG absolute times mean little; compare runs of the same boot
// (BASE=<rev> ROUNDS=3: the table's last column is the ratio of the
// medians), and read the host's load average the report prints. IPVS
// operation counts are exact; times vary by 2× between identical runs on
// a busy host (BENCHMARKS.md). This package's own code must not import the proxy's packages:
// it measures a binary. The one exception is a reference, not a
// measurement: the writer floor (the tree's IPVS writer alone programming
// the cold start's table into a fresh network namespace, the floor as
// BENCHMARKS.md first defined it), beside the raw floor of moby/ipvs and netlink.
package benchscale
