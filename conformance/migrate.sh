#!/usr/bin/env bash
# The migration run (`make migration`): a two-node lab cluster that starts
# as kubeadm users' clusters do, with upstream kube-proxy v1.36.3 in IPVS
# mode deployed by `kubeadm init phase addon kube-proxy`; traffic running
# (conformance/migration: new connections from pods on both nodes to a
# ClusterIP, DNS through kube-dns, long-lived connections, a
# sessionAffinity: ClientIP Service, NodePort and eTP=Local NodePort
# requests from the lab host as an outside client) through three phases:
#
#   swap      kubectl -n kube-system set image ds/kube-proxy kube-proxy=<our image>
#   rollback  kubectl -n kube-system set image ds/kube-proxy kube-proxy=<kube-proxy's image>
#   control   the old documented path: delete kube-proxy's DaemonSet, kube-proxy
#             --cleanup on every node (deploy/migrate), apply ours (deploy/base)
#
# After the swap it checks every node for kube-proxy's iptables chains and
# ipsets and for IPVS changes by our first sync; edits kube-proxy's
# ConfigMap as MetalLB's guide does (ipvs.strictARP: true), with traffic,
# and checks that every proxy restarted and the node has arp_ignore=1
# (a `config-edit:` line); and runs upstream's
# `[sig-network] Services.*[Conformance]` specs on the migrated cluster.
# One line per phase, exactly
#
#   migration: phase=<swap|rollback|control> node=<variant> requests=N failed=N long-lived=N reset=N ...
#
# goes to stdout and, with the rest, to the variant's block of
# conformance/migration/RESULTS.md (committed; logs under
# .cache/cluster/migration/<stamp>/). Needs root.
#
#   conformance/migrate.sh              # brings the cluster up if none is
#   KIP_MIGRATION_KEEP=1 conformance/migrate.sh   # leave the cluster up after
#   KIP_NODE_VARIANT=forward-drop conformance/migrate.sh
#                                       # nodes as some users have them
#                                       # (hack/cluster/variant.sh; the
#                                       # variant's load: migration/variants.sh)
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/cluster/lib.sh
. "$HERE/../hack/cluster/lib.sh"
# shellcheck source=conformance/migration/variants.sh
. "$HERE/migration/variants.sh"

OURS=${KIP_PROXY_IMAGE:-localhost/kube-ipvs-proxy:lab}
KP_IMAGE=registry.k8s.io/kube-proxy:$K8S_VERSION
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
# KIP_MIGRATION_PHASES: the phases to run, in order (default all); with
# KIP_MIGRATION_OUT, a later run appends to an earlier run's report.
PHASES=${KIP_MIGRATION_PHASES:-swap config e2e rollback control}
OUT=${KIP_MIGRATION_OUT:-$CACHE/migration/$STAMP}
STAMP=$(basename "$OUT")
RESULTS=$HERE/migration/RESULTS.md
LOAD=$CACHE/.load/load
mkdir -p "$OUT" "$(dirname "$LOAD")"
t_start=$(date +%s)

if [[ ! -e $RUN/cluster.env ]] || ! ip netns list | grep -qw "$NETNS"; then
	log "no cluster: bringing up two nodes with upstream kube-proxy (KIP_KUBE_PROXY=upstream), node variant $NODE_VARIANT"
	KIP_KUBE_PROXY=upstream NODES=2 KIP_NODE_VARIANT=$NODE_VARIANT "$REPO/hack/cluster/up.sh"
fi
want_variant=$NODE_VARIANT
# shellcheck source=/dev/null
. "$RUN/cluster.env"
[[ $NODE_VARIANT == "$want_variant" ]] ||
	die "the cluster is up with node variant $NODE_VARIANT, not $want_variant; make cluster-down, then rerun"
[[ $KUBE_PROXY == upstream ]] || die "the cluster runs our proxy from the start; make cluster-down, then rerun"
((NODES >= 2)) || die "the cluster has $NODES node(s); the run wants two"
(cd "$REPO" && CGO_ENABLED=0 go build -o "$LOAD" ./conformance/migration/load)

# --- load -------------------------------------------------------------------

pods_of() { kc -n "$1" get pods -l "$2" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }

# start_load <phase>: the in-cluster clients (a DaemonSet, so their
# counters start at zero), a log follower per client pod, two host clients
# in the lab's network namespace; then 10 s of traffic before the change.
start_load() {
	local phase=$1 p i ip
	sed "s/__DNS_IP__/$DNS4/" "$HERE/migration/clients.yaml" | kc apply -f - >&2
	kc -n migration rollout status ds/client --timeout=5m >&2
	for p in $(pods_of migration app=client); do
		kc -n migration logs -f "$p" >"$OUT/$phase-$p.log" 2>"$OUT/$phase-$p.err" &
		echo $! >>"$OUT/$phase.followers"
	done
	for ((i = 1; i <= NODES; i++)); do
		ip=$(node_ip4 "$i")
		ip netns exec "$NETNS" "$LOAD" client -rate 6 -http "http://$ip:30080/,http://$ip:30081/" -long "$ip:30090" -long-count 2 \
			>"$OUT/$phase-host-$i.log" 2>"$OUT/$phase-host-$i.err" &
		echo $! >>"$OUT/$phase.hosts"
	done
	variant_start_load "$phase"
	sleep 10
}

# stop_load <phase>: 10 s more traffic, then SIGTERM everywhere; writes
# the phase's summed counts, as key=value words, to $OUT/<phase>.counts.
# Not in a subshell: it waits for its own background processes.
stop_load() {
	local phase=$1 pid f i missing
	sleep 10
	while read -r pid; do kill -TERM "$pid" 2>/dev/null || true; done <"$OUT/$phase.hosts"
	while read -r pid; do wait "$pid" 2>/dev/null || true; done <"$OUT/$phase.hosts"
	kc -n migration delete ds client --wait=true >&2
	variant_stop_pods
	for ((i = 0; i < 60; i++)); do
		missing=0
		for f in "$OUT/$phase"-*.log "$OUT/$phase".x-*.log; do
			[[ -e $f ]] || continue
			grep -q '^load: requests=' "$f" || missing=1
		done
		((missing == 0)) && break
		sleep 1
	done
	while read -r pid; do kill "$pid" 2>/dev/null || true; done <"$OUT/$phase.followers"
	for f in "$OUT/$phase"-*.log; do
		grep '^load: requests=' "$f" | tail -n 1 || die "$f: no final counts (see ${f%.log}.err)"
	done | awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "=")
			if (kv[1] == "slowest-ms") { if (kv[2] > sum[kv[1]]) sum[kv[1]] = kv[2] } else sum[kv[1]] += kv[2]
			if (!(kv[1] in seen)) { seen[kv[1]] = 1; order[++n] = kv[1] } } }
		END { for (i = 1; i <= n; i++) printf "%s%s=%d", (i > 1 ? " " : ""), order[i], sum[order[i]] }' \
		>"$OUT/$phase.counts"
	variant_counts "$phase" >>"$OUT/$phase.counts"
}

# --- hand-over --------------------------------------------------------------

# handed_over <node> <image> <since>: the node's kube-proxy pod runs image,
# started after since, and its /healthz answers 200.
handed_over() {
	local node=$1 image=$2 since=$3 line ip
	line=$(kc -n kube-system get pods -l k8s-app=kube-proxy --field-selector "spec.nodeName=$node" \
		-o jsonpath='{range .items[*]}{.spec.containers[0].image} {.status.containerStatuses[0].state.running.startedAt}{"\n"}{end}')
	[[ $(wc -l <<<"$line") == 1 && $line == "$image "* ]] || return 1
	[[ $(date -d "${line#* }" +%s 2>/dev/null || echo 0) -ge $since ]] || return 1
	ip=$(kc get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
	[[ $(in_ns curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$ip:10256/healthz") == 200 ]]
}

# set_image <image>: kubectl set image on kubeadm's DaemonSet; waits for
# every node; prints node=seconds words (from the command to that node's
# new pod healthy).
set_image() {
	local image=$1 t0 i node left
	t0=$(date +%s)
	kc -n kube-system set image ds/kube-proxy "kube-proxy=$image" >&2
	declare -A done_at=()
	left=$NODES
	while ((left > 0)); do
		(($(date +%s) - t0 < 900)) || die "the hand-over to $image did not finish in 15 minutes"
		for ((i = 1; i <= NODES; i++)); do
			node=$(node_name "$i")
			[[ -n ${done_at[$node]:-} ]] && continue
			if handed_over "$node" "$image" "$t0"; then
				done_at[$node]=$(($(date +%s) - t0))
				left=$((left - 1))
				log "$node runs $image (+${done_at[$node]}s)"
			fi
		done
		sleep 1
	done
	kc -n kube-system rollout status ds/kube-proxy --timeout=5m >&2
	for ((i = 1; i <= NODES; i++)); do node=$(node_name "$i"); printf '%s=%ss ' "$node" "${done_at[$node]}"; done
}

# --- checks on the nodes ----------------------------------------------------

# inspect_nodes <tag>: a privileged host-network pod per node, from
# kube-proxy's image (iptables-nft and -legacy, ipset, bash), prints
# kube-proxy's chains (nft, then legacy) and ipsets left, and our IPVS
# operation counters.
inspect_nodes() {
	local tag=$1 p
	kc apply -f - >&2 <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: inspect, namespace: migration}
spec:
  selector: {matchLabels: {app: inspect}}
  template:
    metadata: {labels: {app: inspect}}
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 0
      containers:
      - name: inspect
        image: $KP_IMAGE
        command: [/bin/bash, -c]
        args:
        - |
          echo "chains: \$( (iptables-nft-save; ip6tables-nft-save) 2>/dev/null | grep -oE '^:KUBE-[A-Z0-9-]+' | sort -u | tr '\n' ' ')"
          echo "legacy-chains: \$( (iptables-legacy-save; ip6tables-legacy-save) 2>/dev/null | grep -oE '^:KUBE-[A-Z0-9-]+' | sort -u | tr '\n' ' ')"
          echo "ipsets: \$(ipset list -n 2>/dev/null | grep '^KUBE-' | tr '\n' ' ')"
          echo "arp_ignore: \$(cat /proc/sys/net/ipv4/conf/all/arp_ignore)"
          if exec 3<>/dev/tcp/127.0.0.1/10249; then
            printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
            m=\$(cat <&3)
            echo "proxy: \$(grep -c '^kube_ipvs_proxy_' <<<"\$m") kube_ipvs_proxy series; ipvs-ops: \$(grep '^kube_ipvs_proxy_netlink_ops_total' <<<"\$m" | tr '\n' ' ')"
          fi
          sleep infinity
        securityContext: {privileged: true}
YAML
	kc -n migration rollout status ds/inspect --timeout=5m >&2
	sleep 3
	for p in $(pods_of migration app=inspect); do
		echo "$tag $(kc -n migration get pod "$p" -o jsonpath='{.spec.nodeName}'): $(kc -n migration logs "$p" | tr '\n' ' ')"
	done
	kc -n migration delete ds inspect --wait=true >&2
}

# --- the run ----------------------------------------------------------------

report=$OUT/report.txt
phase() { [[ " $PHASES " == *" $1 "* ]]; }
[[ -e $report ]] || {
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit: $(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD || echo -dirty)"
	echo "command: ${KIP_MIGRATION_COMMAND:-make migration (conformance/migrate.sh)}"
	echo "cluster: $NODES nodes, $FAMILY, node variant $NODE_VARIANT, kube-proxy $KP_IMAGE (kubeadm addon, mode: ipvs) → $OURS ($(cut -d' ' -f2 "$CACHE/images/kube-ipvs-proxy.ref"))"
	echo "kube-proxy's ConfigMap: clusterCIDR=\"$(kc -n kube-system get configmap kube-proxy -o jsonpath='{.data.config\.conf}' | awk '$1 == "clusterCIDR:" { print $2 }' | tr -d '"')\""
} >"$report"
echo "phases: $PHASES ($(date -u +%H:%M:%SZ))" >>"$report"

kc create namespace migration --dry-run=client -o yaml | kc apply -f - >&2
kc apply -f "$HERE/migration/workload.yaml" >&2
kc -n migration rollout status deploy/backend --timeout=5m >&2
variant_workload
if phase swap; then
inspect_nodes "before-swap" >>"$report"

log "phase swap: set image to $OURS"
start_load swap
handover=$(set_image "$OURS")
stop_load swap
counts=$(cat "$OUT/swap.counts")
echo "migration: phase=swap node=$NODE_VARIANT $counts handover=${handover% }" | tee -a "$report"
inspect_nodes "after-swap" >>"$report"
fi

# restarts <node>: our container's restart count on the node.
restarts() {
	kc -n kube-system get pods -l k8s-app=kube-proxy --field-selector "spec.nodeName=$1" \
		-o jsonpath='{.items[0].status.containerStatuses[0].restartCount}'
}

if phase config; then
log "config edit: MetalLB's strictARP in kube-proxy's ConfigMap reaches ours (exit, restart)"
start_load config
declare -A before=()
for ((i = 1; i <= NODES; i++)); do before[$i]=$(restarts "$(node_name "$i")"); done
t0=$(date +%s)
kc -n kube-system get configmap kube-proxy -o yaml | sed -e 's/strictARP: false/strictARP: true/' |
	kc apply -f - >&2
took=""
for ((i = 1; i <= NODES; i++)); do
	node=$(node_name "$i")
	until [[ $(restarts "$node") -gt ${before[$i]} ]] && handed_over "$node" "$OURS" 0; do
		(($(date +%s) - t0 < 300)) || die "$node's proxy did not restart on the ConfigMap edit in 5 minutes"
		sleep 1
	done
	took+="$node=$(($(date +%s) - t0))s "
done
stop_load config
counts=$(cat "$OUT/config.counts")
echo "config-edit: $counts restarted=${took% }" | tee -a "$report"
inspect_nodes "after-config-edit" >>"$report"

fi

if phase e2e; then
log "upstream's Services Conformance specs on the migrated cluster"
if FOCUS='\[sig-network\] Services.*\[Conformance\]' "$HERE/run.sh" >"$OUT/e2e.log" 2>&1; then e2e=passed; else e2e=FAILED; fi
echo "e2e after swap ($e2e): $(grep -E '^Ran [0-9]+ of [0-9]+ Specs' "$OUT/e2e.log" | tail -n 1)" | tee -a "$report"
grep -E '^(SUCCESS|FAIL)!' "$OUT/e2e.log" | tail -n 1 >>"$report" || true
fi

# cleanup_table: deploy/handback, the one-shot DaemonSet with our image
# and --cleanup-table-only: our nftables table goes, IPVS and kube-ipvs0
# stay kube-proxy's.
cleanup_table() {
	kc kustomize "$REPO/deploy/handback" |
		kc set image --local -f - "kube-ipvs-proxy-cleanup=$OURS" -o yaml |
		kc apply -f - >&2
	kc -n kube-system rollout status ds/kube-ipvs-proxy-cleanup --timeout=10m >&2
	kc -n kube-system logs -l k8s-app=kube-ipvs-proxy-cleanup -c kube-ipvs-proxy-cleanup --prefix
	kc -n kube-system delete ds kube-ipvs-proxy-cleanup >&2
}

if phase rollback; then
log "phase rollback: set image to $KP_IMAGE, then our table goes (--cleanup --cleanup-table-only)"
start_load rollback
handover=$(set_image "$KP_IMAGE")
cleanup_table >>"$report"
stop_load rollback
counts=$(cat "$OUT/rollback.counts")
echo "migration: phase=rollback node=$NODE_VARIANT $counts handover=${handover% }" | tee -a "$report"
inspect_nodes "after-rollback" >>"$report"
fi

if phase control; then
log "phase control: the old documented path (delete, kube-proxy --cleanup, apply)"
start_load control
t0=$(date +%s)
kc -n kube-system delete ds kube-proxy --wait=true >&2
kc -n kube-system wait --for=delete pod -l k8s-app=kube-proxy --timeout=5m >&2 || true
# deploy/migrate pins kube-proxy's image already (kubectl set image --local
# prints nothing for an unchanged image).
kc apply -k "$REPO/deploy/migrate" >&2
kc -n kube-system rollout status ds/kube-proxy-cleanup --timeout=10m >&2
kc -n kube-system delete ds kube-proxy-cleanup >&2
kc apply -k "$CLUSTER_DIR/overlay" >&2
kc -n kube-system rollout status ds/kube-ipvs-proxy --timeout=10m >&2
stop_load control
counts=$(cat "$OUT/control.counts")
echo "migration: phase=control node=$NODE_VARIANT $counts took=$(($(date +%s) - t0))s" | tee -a "$report"
fi

echo "total: $(($(date +%s) - t_start))s; logs: .cache/cluster/migration/$STAMP" >>"$report"
"$HERE/migration/results.sh" "$RESULTS" "$NODE_VARIANT" "$report"
log "results: $RESULTS"
grep '^migration:' "$report"
if [[ -z ${KIP_MIGRATION_KEEP:-} ]]; then
	"$REPO/hack/cluster/down.sh"
fi
