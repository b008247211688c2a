#!/usr/bin/env bash
# The migration run (`make migration`): a two-node lab cluster that starts
# as kubeadm users' clusters do, with upstream kube-proxy v1.36.3 in IPVS
# mode deployed by `kubeadm init phase addon kube-proxy`; traffic running
# (conformance/migration: new connections from pods on both nodes to a
# ClusterIP, DNS through kube-dns, long-lived connections, a
# sessionAffinity: ClientIP Service, NodePort and eTP=Local NodePort
# requests from the lab host as an outside client) through four phases:
#
#   restart   the lab's own baseline, before the swap: kube-proxy
#             restarted onto itself (`kubectl rollout restart`), a
#             hand-over that changes no proxy and no rule, under the same
#             load; what it loses the lab loses (pods replaced on a TCG
#             node), and the verdict reports it without judging it
#   swap      README.md's Install as deploy/README.md writes it out: the
#             preflight for every node, the backup, one patch of our image
#             and the readiness probe, rollout status, the verify
#   rollback  its "Roll back": kube-proxy's image and the probes off in one patch, deploy/handback
#   control   the old documented path: delete kube-proxy's DaemonSet, kube-proxy
#             --cleanup on every node (deploy/migrate), apply ours (deploy/base)
#
# The swap and rollback commands are the READMEs' own, placeholders
# filled (deploy/swapsteps_test.go holds them to it); what the lab adds
# around them (per-node hand-over times, the node inspections, the
# scripted ConfigMap edit) is measurement and says so.
#
# After the swap it checks every node for kube-proxy's iptables chains and
# ipsets and for IPVS changes by our first sync; edits kube-proxy's
# ConfigMap as MetalLB's guide does (ipvs.strictARP: true), with traffic,
# and checks that every proxy restarted and the node has arp_ignore=1
# (a `config-edit:` line); and runs upstream's
# `[sig-network] Services.*[Conformance]` specs on the migrated cluster.
# One line per phase, exactly
#
#   migration: phase=<restart|swap|rollback|control> node=<variant> requests=N failed=N long-lived=N reset=N ...
#
# goes to stdout and, with the rest, to the variant's block of
# conformance/migration/RESULTS.md (committed; logs under
# .cache/cluster/migration/<stamp>/). Needs root.
#
#   conformance/migrate.sh              # brings the cluster up if none is
#   KIP_MIGRATION_KEEP=1 conformance/migrate.sh   # leave the cluster up after
#   KIP_MIGRATION_RATE=6 conformance/migrate.sh  # half the new connections
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
# shellcheck source=conformance/migration/timeline.sh
. "$HERE/migration/timeline.sh"

OURS=${KIP_PROXY_IMAGE:-localhost/kube-ipvs-proxy:lab}
# KIP_MIGRATION_RATE: each node's pod client's new connections a second
# (default 12); the lab host's client per node makes half as many. The
# report's load: line says what a run used.
RATE=${KIP_MIGRATION_RATE:-12}
[[ $RATE =~ ^[1-9][0-9]*$ && $RATE -ge 2 ]] || die "KIP_MIGRATION_RATE=$RATE: want a whole number of 2 or more"
KP_IMAGE=registry.k8s.io/kube-proxy:$K8S_VERSION
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
# KIP_MIGRATION_PHASES: the phases to run, in order (default all); with
# KIP_MIGRATION_OUT, a later run appends to an earlier run's report.
PHASES=${KIP_MIGRATION_PHASES:-restart swap config e2e rollback control}
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
# The binary the preflight runs: deploy/README's `make build`.
make -s -C "$REPO" build >&2
PROXY_BIN=$REPO/bin/kube-ipvs-proxy

# --- the install steps' setting -----------------------------------------------
# Lab only: the documented commands run as written, with kubectl and the
# binary inside the lab's network namespace (where the API server is) as
# the cluster admin, in $OUT with a copy of deploy/ (the docs run them
# from the repository root; the copy stays with the logs), and with the
# docs' placeholders the run's: REGISTRY/kube-ipvs-proxy:TAG is $OURS,
# NODE each node, ~/.kube/config $KUBECONFIG.
export KUBECONFIG=$RUN/admin.kubeconfig
kubectl() { in_ns "$K8S_BIN/kubectl" "$@"; }
kube-ipvs-proxy() { in_ns "$PROXY_BIN" "$@"; }
rm -rf "$OUT/deploy"
cp -r "$REPO/deploy" "$OUT/deploy"
cd "$OUT"

# --- load -------------------------------------------------------------------

pods_of() { kc -n "$1" get pods -l "$2" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }

# start_load <phase>: the in-cluster clients (a DaemonSet, so their
# counters start at zero), a log follower per client pod, two host clients
# in the lab's network namespace; then 10 s of traffic before the change.
start_load() {
	local phase=$1 p i ip
	sed -e "s/__DNS_IP__/$DNS4/" -e "s/__RATE__/$RATE/" "$HERE/migration/clients.yaml" | kc apply -f - >&2
	kc -n migration rollout status ds/client --timeout=5m >&2
	for p in $(pods_of migration app=client); do
		kc -n migration logs -f "$p" >"$OUT/$phase-$p.log" 2>"$OUT/$phase-$p.err" &
		echo $! >>"$OUT/$phase.followers"
	done
	for ((i = 1; i <= NODES; i++)); do
		ip=$(node_ip4 "$i")
		ip netns exec "$NETNS" "$LOAD" client -rate "$((RATE / 2))" -http "http://$ip:30080/,http://$ip:30081/" -long "$ip:30090" -long-count 2 \
			>"$OUT/$phase-host-$i.log" 2>"$OUT/$phase-host-$i.err" &
		echo $! >>"$OUT/$phase.hosts"
	done
	variant_start_load "$phase"
	sleep 10
}

# stop_load <phase>: 30 s more traffic (what goes after the last proxy is
# healthy, such as the handback's removal of our table, is then under
# load too), then SIGTERM everywhere; writes the phase's summed counts, as
# key=value words, to $OUT/<phase>.counts and the backends' logs (what
# each answered, per client, every 10 s) to $OUT/<phase>.serve.log.
# Not in a subshell: it waits for its own background processes.
stop_load() {
	local phase=$1 pid f i missing
	sleep 30
	kc -n migration logs --timestamps --prefix --tail=-1 --max-log-requests 20 -l load=serve \
		>"$OUT/$phase.serve.log" 2>&1 || true
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

# watch_handover <image> <phase> (in the background, started just before
# the documented image patch; lab-only measurement): waits for every
# node's pod to run image and answer /healthz, and writes node=seconds
# words (from its start to that node's new pod healthy) to
# $OUT/<phase>.handover; exits 1 after 15 minutes.
watch_handover() {
	local image=$1 phase=$2 t0 i node left
	t0=$(date +%s)
	declare -A done_at=()
	left=$NODES
	while ((left > 0)); do
		if (($(date +%s) - t0 >= 900)); then
			log "the hand-over to $image did not finish in 15 minutes"
			return 1
		fi
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
	for ((i = 1; i <= NODES; i++)); do node=$(node_name "$i"); printf '%s=%ss ' "$node" "${done_at[$node]}"; done >"$OUT/$phase.handover"
}

# wait_synced_since <t> <what>: until every node's proxy reports a sync
# after t (seconds since the epoch) for each of the cluster's IP families,
# read from the per-family entries of its /healthz "status" (kube-proxy's
# and ours): the top-level lastUpdated reads "now" whenever the proxy is
# healthy, and on an IPv4 cluster kube-proxy's idle IPv6 proxier has an
# entry long before the IPv4 one. Only for proxies that started before t:
# kube-proxy marks each family updated when its sync loop starts, before
# a sync. A proxy syncs on a change and at least every syncPeriod
# (kubeadm's 30 s). Ends the run after 5 minutes, naming what t was.
wait_synced_since() {
	local t=$1 what=$2 i ip body deadline=$((SECONDS + 300)) families
	case $FAMILY in ipv4) families=IPv4 ;; ipv6) families=IPv6 ;; *) families="IPv4 IPv6" ;; esac
	for ((i = 1; i <= NODES; i++)); do
		ip=$(node_ip4 "$i")
		while :; do
			body=$(in_ns curl -s --max-time 2 "http://$ip:10256/healthz" || true)
			# shellcheck disable=SC2086 # one word per family
			synced_since "$t" "$body" $families && break
			((SECONDS < deadline)) || die "$(node_name "$i")'s proxy did not sync in 5 minutes after $what (/healthz: $body)"
			sleep 1
		done
	done
}

# synced_since <t> <healthz body> <family>...: whether the body's "status"
# has an entry for each family whose lastUpdated is after t.
synced_since() {
	local t=$1 body=$2 family when
	shift 2
	for family; do
		when=$(grep -oE "\"$family\": *\{ *\"lastUpdated\": *\"[^\"]+\"" <<<"$body" | sed -E 's/.*: *"([^"]+)"$/\1/' || true)
		[[ -n $when ]] && (($(date -d "$when" +%s 2>/dev/null || echo 0) > t)) || return 1
	done
}

# wait_kube_proxy_rules <phase>: until every node's recorder (timeline.sh)
# has counted rules in kube-proxy's nat KUBE-SERVICES (iptables-nft or
# -legacy) during the phase, which the iptables-restore at the end of its
# first sync writes; /healthz cannot tell, since kube-proxy marks each
# family updated when its sync loop starts. For a phase that starts with
# ours serving, where that chain is empty. Ends the run after 5 minutes.
wait_kube_proxy_rules() {
	local phase=$1 i log deadline=$((SECONDS + 300))
	for ((i = 1; i <= NODES; i++)); do
		log=$OUT/$phase.node-$(node_name "$i").log
		until grep -qE 'kp-KUBE-SERVICES=[1-9]' "$log" 2>/dev/null; do
			((SECONDS < deadline)) || die "no rules of kube-proxy on $(node_name "$i") 5 minutes after the $phase's rollout ($log)"
			sleep 2
		done
	done
}

# finish_handover <phase> <watcher>: waits for the phase's hand-over
# watcher, ends its load and timeline, and writes its result line to
# stdout and the report.
finish_handover() {
	local phase=$1 watcher=$2 handover counts
	wait "$watcher" || die "phase $phase: the hand-over did not finish"
	handover=$(cat "$OUT/$phase.handover")
	stop_load "$phase"
	timeline_stop "$phase"
	counts=$(cat "$OUT/$phase.counts")
	echo "migration: phase=$phase node=$NODE_VARIANT $counts handover=${handover% }" | tee -a "$report"
}

# --- checks on the nodes ----------------------------------------------------

# inspect_nodes <tag> (lab-only measurement, beyond the documented
# verify): a privileged host-network pod per node, from kube-proxy's image
# (iptables-nft and -legacy, ipset, bash), prints kube-proxy's chains
# (nft, then legacy) and ipsets left, and our IPVS operation counters.
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

# --- the documented checks ---------------------------------------------------

# preflight: deploy/README's step 0 for every node, from the lab host
# (so without the kernel checks, which it makes only on the node); a
# non-zero exit ends the run. Its output goes to $OUT/preflight-NODE.log,
# a line per node to stdout.
preflight() {
	local i node
	kubectl -n kube-system get cm kube-proxy -o jsonpath='{.data.config\.conf}' > kube-proxy-config.conf
	for ((i = 1; i <= NODES; i++)); do
		node=$(node_name "$i")
		if ! kube-ipvs-proxy --preflight --kubeconfig "$KUBECONFIG" --config kube-proxy-config.conf --hostname-override "$node" >"preflight-$node.log" 2>&1; then
			die "the preflight for $node failed: $(tail -n 5 "preflight-$node.log" | tr '\n' ' ') ($OUT/preflight-$node.log)"
		fi
		echo "preflight $node: $(tail -n 1 "preflight-$node.log" | sed 's/^preflight //') ($(head -n 1 "preflight-$node.log" | sed 's/^.*: //'))"
	done
}

# verify_script: the node's part of deploy/README's step 4, as written,
# with a marker before each command.
verify_script() {
	cat <<'SH'
echo "== healthz"
curl -s http://127.0.0.1:10256/healthz     # 200 and a JSON body
echo; echo "== ipvsadm"
ipvsadm -Ln                              # a virtual server per Service port
echo "== kube-ipvs0"
ip addr show kube-ipvs0                  # the Service addresses
echo "== table"
nft list table inet kube-ipvs-proxy      # our table
echo "== tables"
nft list tables                          # no "ip kube-proxy" / "ip6 kube-proxy"
echo "== KUBE-SERVICES"
iptables-save -t nat | grep -c KUBE-SERVICES   # 0 (also ip6tables-save)
echo "== end"
SH
}

# section <name> <text>: the lines of text after the marker "== name",
# up to the next marker.
section() { awk -v s="== $1" '$0 == s { on = 1; next } /^== / { on = 0 } on' <<<"$2"; }

# nft_count <section> <regexp> <text>: the section's lines matching
# regexp, or nft-aborted where the node's nft died listing the ruleset
# (Debian 12's nft 1.0.6 asserted on an older version's forward rules):
# the verify fails then, as the operator's nft list would.
nft_count() {
	local body
	body=$(section "$1" "$3")
	if grep -q 'Assertion .* failed\|Aborted' <<<"$body"; then
		echo nft-aborted
	else
		grep -cE "$2" <<<"$body" || true
	fi
}

# verify: deploy/README's step 4. READY equals DESIRED, then on every
# node the documented commands through `kubectl debug node/NAME
# --profile=sysadmin` and `chroot /host` (the node's own curl, ipvsadm,
# ip, nft, iptables-save), not attached: the pod's log is read when it
# has run; then the documented DNS check from a pod. One line per node
# and one for DNS; the run ends on a node that fails a check (the
# kube-proxy nat count is reported, not judged: iptables-legacy rules
# are a node variant's subject) and goes on after a failed DNS check,
# which the load's own DNS counts judge.
verify() {
	local i node pod out healthz vs addrs table kp nat dns
	[[ $(kubectl -n kube-system get ds kube-proxy -o jsonpath='{.status.numberReady}/{.status.desiredNumberScheduled}') == "$NODES/$NODES" ]] ||
		die "verify: kube-proxy's DaemonSet is not READY on every node: $(kubectl -n kube-system get ds kube-proxy --no-headers)"
	for ((i = 1; i <= NODES; i++)); do
		node=$(node_name "$i")
		pod=$(kubectl debug "node/$node" --profile=sysadmin --image="$KP_IMAGE" -- chroot /host bash -c "$(verify_script)" |
			grep -oE 'node-debugger-[a-z0-9-]+' | head -n 1)
		[[ -n $pod ]] || die "verify: kubectl debug node/$node made no pod"
		kubectl wait --for=jsonpath='{.status.phase}'=Succeeded "pod/$pod" --timeout=5m >&2 ||
			die "verify: $pod on $node did not succeed: $(kubectl logs "$pod" 2>&1 | tail -n 5)"
		out=$(kubectl logs "$pod")
		printf '%s\n' "$out" >"verify-$node.log"
		kubectl delete pod "$pod" --wait=false >&2
		healthz=$(section healthz "$out" | head -n 1)
		vs=$(section ipvsadm "$out" | grep -cE '^(TCP|UDP|SCTP) ' || true)
		addrs=$(section kube-ipvs0 "$out" | grep -cE '^ +inet6? ' || true)
		table=$(nft_count table '^table inet kube-ipvs-proxy' "$out")
		kp=$(nft_count tables '^table ip6? kube-proxy$' "$out")
		# iptables-save warns on stderr (the log holds both) when legacy tables exist
		nat=$(section KUBE-SERVICES "$out" | grep -v "^#" | head -n 1)
		echo "verify $node: healthz=$([[ $healthz == '{'* ]] && echo json || echo "'$healthz'") ipvs-virtual-servers=$vs kube-ipvs0-addresses=$addrs our-table=$table kube-proxy-nft-tables=$kp nat-KUBE-SERVICES=$nat"
		[[ $healthz == '{'* && $vs -gt 0 && $addrs -gt 0 && $table != 0 && $table != nft-aborted &&
			$kp != [1-9]* && $kp != nft-aborted ]] ||
			die "verify: $node fails deploy/README's step 4 (verify-$node.log)"
	done
	dns=$(kubectl run dns-check --rm -it --restart=Never --image=registry.k8s.io/e2e-test-images/busybox:1.37.0-1 -- nslookup kubernetes.default.svc.cluster.local 2>&1 </dev/null || true)
	printf '%s\n' "$dns" >verify-dns.log
	echo "verify dns-check: $(grep -A1 '^Name:' <<<"$dns" | grep -oE 'Address:? *[0-9a-f.:]+' | head -n 1 || echo "FAILED (verify-dns.log)")"
}

# --- the run ----------------------------------------------------------------

report=$OUT/report.txt
phase() { [[ " $PHASES " == *" $1 "* ]]; }
[[ -e $report ]] || {
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit: $(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD || echo -dirty)"
	echo "command: ${KIP_MIGRATION_COMMAND:-make migration (conformance/migrate.sh)}"
	echo "cluster: $NODES nodes, $FAMILY, node variant $NODE_VARIANT, kube-proxy $KP_IMAGE (kubeadm addon, mode: ipvs) → $OURS ($(cut -d' ' -f2 "$CACHE/images/kube-ipvs-proxy.ref"))"
	echo "load: pod clients $RATE new connections/s per node, the lab host's $((RATE / 2))/s per node (KIP_MIGRATION_RATE)"
	echo "kube-proxy's ConfigMap: clusterCIDR=\"$(kc -n kube-system get configmap kube-proxy -o jsonpath='{.data.config\.conf}' | awk '$1 == "clusterCIDR:" { print $2 }' | tr -d '"')\""
} >"$report"
echo "phases: $PHASES ($(date -u +%H:%M:%SZ))" >>"$report"

kc create namespace migration --dry-run=client -o yaml | kc apply -f - >&2
kc apply -f "$HERE/migration/workload.yaml" >&2
kc -n migration rollout status deploy/backend --timeout=5m >&2
variant_workload
# The first phase's load starts on Services made moments ago, and on a
# TCG node the proxy programs a ready endpoint seconds later: a request
# in that gap would count against the hand-over. Wait for a sync on every
# node after the workload was ready.
wait_synced_since "$(date +%s)" "the workload was ready"
if phase restart; then
log "phase restart: kube-proxy restarted onto itself (the lab's baseline: a hand-over that changes nothing)"
start_load restart
timeline_start restart
{
watch_handover "$KP_IMAGE" restart &
watcher=$!
kubectl -n kube-system rollout restart ds/kube-proxy
kubectl -n kube-system rollout status ds/kube-proxy --timeout=30m
} >>steps.log
finish_handover restart "$watcher"
fi

if phase swap; then
inspect_nodes "before-swap" >>"$report"

log "phase swap: the preflight, the backup, then image $OURS and the readiness probe in one patch (README.md's Install)"
preflight | tee -a "$report"
# Step 1, as documented.
mkdir kube-proxy-backup
kubectl -n kube-system get ds kube-proxy -o yaml > kube-proxy-backup/daemonset.yaml
kubectl -n kube-system get cm kube-proxy -o yaml > kube-proxy-backup/configmap.yaml
KP_IMAGE=$(kubectl -n kube-system get ds kube-proxy -o jsonpath='{.spec.template.spec.containers[0].image}')
# Step 2 (kubeadm's proxy.disabled and --skip-phases) is not run: the lab
# has no kubeadm-config ConfigMap (it runs kubeadm's addon phase only)
# and never runs kubeadm upgrade, so nothing would put the image back.
start_load swap
timeline_start swap
{
# Step 3, as documented: the image and the readiness probe in one patch.
watch_handover "$OURS" swap &
watcher=$!
IMAGE="$OURS"
kubectl -n kube-system patch ds kube-proxy --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"name":"kube-proxy","image":"'"$IMAGE"'","readinessProbe":{"httpGet":{"path":"/healthz","port":10256},"periodSeconds":5,"timeoutSeconds":5,"failureThreshold":3}}]}}}}'
kubectl -n kube-system rollout status ds/kube-proxy --timeout=30m
} >>steps.log
finish_handover swap "$watcher"
# Step 4, as documented (DNS through the DNS Service is the load's).
verify | tee -a "$report"
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
# The documented edit ("Config edits": edit kube-proxy's ConfigMap as
# before), scripted.
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

if phase rollback; then
log "phase rollback: image $KP_IMAGE and the probes off in one patch, then deploy/handback removes our table (deploy/README's Roll back)"
start_load rollback
timeline_start rollback
{
# Step 1, as documented.
watch_handover "$KP_IMAGE" rollback &
watcher=$!
kubectl -n kube-system patch ds kube-proxy --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"name":"kube-proxy","image":"'"$KP_IMAGE"'","readinessProbe":null,"livenessProbe":null}]}}}}'
kubectl -n kube-system rollout status ds/kube-proxy --timeout=30m
wait "$watcher" || die "phase rollback: the hand-over did not finish"
handover=$(cat "$OUT/rollback.handover")
# Step 2, as documented, once kube-proxy's rules are in on every node, so
# the one-shot pods do not start beside its first full sync on a busy node;
# the one-shot's log goes to the report.
wait_kube_proxy_rules rollback
kubectl kustomize deploy/handback \
  | kubectl set image --local -f - kube-ipvs-proxy-cleanup="$OURS" -o yaml \
  | kubectl apply -f -
kubectl -n kube-system rollout status ds/kube-ipvs-proxy-cleanup --timeout=10m
kubectl -n kube-system logs -l k8s-app=kube-ipvs-proxy-cleanup -c kube-ipvs-proxy-cleanup --prefix --timestamps >>"$report"
kubectl -n kube-system delete ds kube-ipvs-proxy-cleanup
# Step 3 (undo the swap's step 2) is not run: the swap did not run it.
} >>steps.log
stop_load rollback
timeline_stop rollback
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
# The run fails on a lost request in a hand-over, or a control that lost
# none (verdict.sh); the report is in RESULTS.md either way.
"$HERE/migration/verdict.sh" "$report" || die "the run lost requests or its control lost none (the verdict lines above; $OUT)"
