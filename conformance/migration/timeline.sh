# shellcheck shell=bash
# The migration run's timeline of a hand-over (lab-only measurement,
# sourced by conformance/migrate.sh): what decides why a request was
# lost, each line with its time, in the run directory beside the client
# logs (whose failures carry their times too):
#
#   <phase>.timeline       the proxies' and the cleanup one-shot's pods as
#                          they change, the migration namespace's
#                          EndpointSlices (ready flags per endpoint), and
#                          every Event of the cluster
#   <phase>.pod-<pod>.log  each proxy pod's and cleanup pod's log
#                          (kubectl logs --timestamps), ours before they
#                          go and kube-proxy's from their start: its sync
#                          lines, the cleanup's "removed nftables table"
#   <phase>.node-<node>.log on the node itself, 5 s after the last
#                          sample: the node's 1-minute load average,
#                          whether our table is there, the rule counts of
#                          kube-proxy's nat KUBE-SERVICES and
#                          KUBE-POSTROUTING (iptables-nft and -legacy
#                          summed; -legacy only once the kernel has a
#                          legacy nat table, as its -S would create
#                          one), the IPVS table's version (v1,
#                          v2, ... : it changed), and the whole
#                          `ipvsadm -Sn` (no counters) each time it
#                          changes. Three or four commands a sample and
#                          the rest bash builtins: on a TCG node every
#                          process started costs CPU the hand-over needs
#
# timeline_start <phase> starts the recorders in the background (their pids
# in $OUT/<phase>.timeline-pids); timeline_stop <phase> ends them.

# stamp: each line of stdin with the time it was read.
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date -u +%T.%3N)" "$l"; done; }

# timeline_nodes_spec: the per-node recorder's DaemonSet.
timeline_nodes_spec() {
	cat <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: timeline, namespace: migration}
spec:
  selector: {matchLabels: {app: timeline}}
  template:
    metadata: {labels: {app: timeline}}
    spec:
      hostNetwork: true
      hostPID: true
      terminationGracePeriodSeconds: 0
      tolerations: [{operator: Exists}]
      containers:
      - name: timeline
        image: $KP_IMAGE
        imagePullPolicy: IfNotPresent
        securityContext: {privileged: true}
        command: [nsenter, -t, "1", -m, -n, --, /bin/bash, -c]
        args:
        - |
          export TZ=UTC; last="" n=0
          while :; do
            printf -v t '%(%T)T.%s' -1 "\${EPOCHREALTIME#*.}"; t=\${t:0:12}
            read -r load1 _ </proc/loadavg
            tables=\$(nft list tables 2>/dev/null)
            table=0; [[ \$tables == *"inet kube-ipvs-proxy"* ]] && table=1
            svc=0 post=0 names=""
            [[ -r /proc/net/ip_tables_names ]] && read -r -d '' names </proc/net/ip_tables_names
            while read -r a chain _; do
              [[ \$a == -A && \$chain == KUBE-SERVICES ]] && svc=\$((svc + 1))
              [[ \$a == -A && \$chain == KUBE-POSTROUTING ]] && post=\$((post + 1))
            done < <(iptables-nft -t nat -S 2>/dev/null; [[ \$names != *nat* ]] || iptables-legacy -t nat -S 2>/dev/null)
            ipvs=\$(ipvsadm -Sn 2>&1)
            [[ \$ipvs == "\$last" ]] || n=\$((n + 1))
            echo "\$t load1=\$load1 our-table=\$table kp-KUBE-SERVICES=\$svc kp-KUBE-POSTROUTING=\$post ipvs=v\$n"
            if [[ \$ipvs != "\$last" ]]; then
              while IFS= read -r l; do echo "\$t ipvsadm: \$l"; done <<<"\$ipvs"
              last=\$ipvs
            fi
            sleep 5
          done
YAML
}

timeline_start() {
	local phase=$1 pids=$OUT/$1.timeline-pids
	: >"$pids"
	kc -n migration get pods -o wide >"$OUT/$phase.pods" 2>&1 || true
	{
		(kc -n kube-system get pods -l 'k8s-app in (kube-proxy,kube-ipvs-proxy-cleanup)' -o wide -w 2>&1 | sed -u 's/^/pods: /') &
		echo $! >>"$pids"
		(kc -n migration get endpointslices -w \
			-o custom-columns='NAME:.metadata.name,ADDRS:.endpoints[*].addresses[0],READY:.endpoints[*].conditions.ready,TERMINATING:.endpoints[*].conditions.terminating' 2>&1 |
			sed -u 's/^/slices: /') &
		echo $! >>"$pids"
		(kc get events -A -w -o custom-columns='NS:.metadata.namespace,OBJ:.involvedObject.name,REASON:.reason,MSG:.message' 2>&1 |
			sed -u 's/^/events: /') &
		echo $! >>"$pids"
	} | stamp >"$OUT/$phase.timeline" &
	echo $! >>"$pids"
	# The recorders' pods start before the change, not in its first
	# seconds beside the first node's new proxy pod.
	timeline_nodes_spec | kc apply -f - >&2
	kc -n migration rollout status ds/timeline --timeout=5m >&2 || true
	timeline_follow "$phase" &
	echo $! >>"$pids"
}

# timeline_follow <phase>: follows, once each, the logs of every proxy and
# cleanup pod and of the per-node recorders, as they appear.
timeline_follow() {
	local phase=$1 pod node
	declare -A following=()
	while :; do
		while read -r pod node; do
			[[ -n $pod && -z ${following[$pod]:-} ]] || continue
			case $pod in
			timeline-*)
				kc -n migration logs -f "$pod" >"$OUT/$phase.node-$node.log" 2>/dev/null &
				;;
			*) kc -n kube-system logs -f --timestamps --all-containers --prefix "$pod" >"$OUT/$phase.pod-$pod.log" 2>/dev/null & ;;
			esac
			sleep 1
			# A pod whose containers have not started yet has no log to follow: try again.
			if kill -0 $! 2>/dev/null || [[ -s $OUT/$phase.pod-$pod.log || -s $OUT/$phase.node-$node.log ]]; then following[$pod]=$!; fi
		done < <(
			kc -n kube-system get pods -l 'k8s-app in (kube-proxy,kube-ipvs-proxy-cleanup)' \
				-o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' 2>/dev/null
			kc -n migration get pods -l app=timeline \
				-o jsonpath='{range .items[?(@.status.phase=="Running")]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' 2>/dev/null
		)
		# kubectl on the host shares the host's two cores with the VMs.
		sleep 5
	done
}

# kill_tree <pid>: the process and everything it started, the parent
# stopped first so that it starts nothing new meanwhile.
kill_tree() {
	local c
	kill -STOP "$1" 2>/dev/null || return 0
	for c in $(pgrep -P "$1"); do kill_tree "$c"; done
	kill -TERM "$1" 2>/dev/null || true
	kill -CONT "$1" 2>/dev/null || true
}

timeline_stop() {
	local phase=$1 pid
	[[ -e $OUT/$phase.timeline-pids ]] || return 0
	while read -r pid; do kill_tree "$pid"; done <"$OUT/$phase.timeline-pids"
	kc -n migration delete ds timeline --wait=false >&2 || true
}
