# shellcheck shell=bash
# shellcheck disable=SC2016 # the loops' lines are bash for the pod, $ and all
# The pieces every node variant's extra clients are made of (sourced by
# variants.sh; nodelocaldns.sh and metallb-l2.sh use them too), so that a
# client's counters, trap, log lines and pacing are written once:
#
#   extra_pod          a bare client pod of the phase, labelled extra=1
#   load_client_spec   its spec running the `load client` program
#   bash_client_spec   its spec running a bash script in kube-proxy's image
#   client_loop        that script's loop: a request, its check, its counts
#   host_client        a `load client` on the lab host, in the lab's netns
#
# Whatever the client, its log ends in the line load's clients print on
# SIGTERM, `load: requests=N failed=N [slowest-ms=N]`, which the phase's
# counts (variant_counts, migrate.sh's stop_load) add up per tag.
# clients_test.sh holds what each variant builds from them to golden files.

# extra_pod <name> <node> <yaml of the spec's remaining lines>: a bare
# client pod of the phase (label extra=1), its log followed by
# variant_start_load.
extra_pod() {
	local name=$1 node=$2 spec=$3
	kc apply -f - >&2 <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: migration, labels: {extra: "1"}}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 10
$spec
YAML
}

# load_client_spec <pod|host> <url> [rate]: the spec lines of a pod
# running `load client` against url, rate requests a second (6 unless
# given), in the pod's own network or (host) the node's.
load_client_spec() {
	local net=$1 url=$2 rate=${3:-6}
	[[ $net == host ]] && echo "  hostNetwork: true"
	echo "  containers:"
	echo "  - {name: client, image: localhost/kip-load:lab, imagePullPolicy: IfNotPresent, args: [client, -rate, '$rate', -http, '$url']}"
}

# bash_client_spec <container> <pod|node> <script>: the spec lines of a pod
# running script with kube-proxy's image's bash (no image to build), as an
# ordinary pod or (node) privileged in the node's network with its PIDs,
# so that `nsenter -t 1` reaches the node's own tools.
bash_client_spec() {
	local name=$1 on=$2 script=$3 l
	if [[ $on == node ]]; then
		echo "  hostNetwork: true"
		echo "  hostPID: true"
	fi
	echo "  containers:"
	echo "  - name: $name"
	echo "    image: registry.k8s.io/kube-proxy:$K8S_VERSION"
	echo "    imagePullPolicy: IfNotPresent"
	[[ $on == node ]] && echo "    securityContext: {privileged: true}"
	echo "    command: [/bin/bash, -c]"
	echo "    args:"
	echo "    - |"
	while IFS= read -r l; do echo "      $l"; done <<<"$script"
}

# client_loop <option value>...: a bash client's loop, one request each
# turn until SIGTERM, when it prints its counts and exits 0. Options:
#
#   -every S     the pause between requests (default 0.2: 5 a second)
#   -clock C     time each request that passes, for slowest-ms: epoch
#                (bash's $EPOCHREALTIME: no process per reading) or date
#                (date +%s%3N); none (the default) prints no slowest-ms
#   -pre LINE    a line of the turn before its clock starts (repeatable)
#   -do LINE     a line of the request, after the clock starts (repeatable)
#   -ok COND     the request passed (with a clock: the time is taken then)
#   -bad COND    the request failed (without a clock)
#   -fail WHAT   the words of a failure's log line on stderr, after the time
#
# The lines are bash as the pod runs it: quote them so that they reach it
# unexpanded ('$got') or expanded on purpose ("$NODELOCAL_IP").
client_loop() {
	local every=0.2 clock=none ok="" bad="" what="" pre=() req=() l start stop
	while (($# > 0)); do
		(($# >= 2)) || die "client_loop: $1 wants a value"
		case $1 in
		-every) every=$2 ;;
		-clock) clock=$2 ;;
		-pre) pre+=("$2") ;;
		-do) req+=("$2") ;;
		-ok) ok=$2 ;;
		-bad) bad=$2 ;;
		-fail) what=$2 ;;
		*) die "client_loop: unknown option $1" ;;
		esac
		shift 2
	done
	case $clock in
	epoch)
		start='t0=$EPOCHREALTIME # bash'"'"'s clock: no process per reading'
		stop='t=$(( (${EPOCHREALTIME/./} - ${t0/./}) / 1000 )); ((t > slowest)) && slowest=$t'
		;;
	date)
		start='t0=$(date +%s%3N)'
		stop='t=$(($(date +%s%3N) - t0)); ((t > slowest)) && slowest=$t'
		;;
	none) ;;
	*) die "client_loop: -clock $clock: want epoch, date or none" ;;
	esac
	# A clock times the passes, so it wants -ok; without one only the
	# failures are written, so -bad.
	[[ -n $what ]] || die "client_loop: no -fail"
	if [[ $clock == none ]]; then
		[[ -n $bad && -z $ok ]] || die "client_loop: without a clock, -bad and no -ok"
		echo 'n=0 failed=0'
		echo 'trap '"'"'echo "load: requests=$n failed=$failed"; exit 0'"'"' TERM'
	else
		[[ -n $ok && -z $bad ]] || die "client_loop: with -clock $clock, -ok and no -bad"
		echo 'n=0 failed=0 slowest=0'
		echo 'trap '"'"'echo "load: requests=$n failed=$failed slowest-ms=$slowest"; exit 0'"'"' TERM'
	fi
	echo 'while :; do'
	for l in "${pre[@]}"; do echo "  $l"; done
	[[ -z ${start:-} ]] || echo "  $start"
	for l in "${req[@]}"; do echo "  $l"; done
	if [[ $clock == none ]]; then
		echo "  if $bad; then"
	else
		echo "  if $ok; then"
		echo "    $stop"
		echo "  else"
	fi
	echo '    failed=$((failed + 1)); echo "$(date -u +%T) '"$what"'" >&2'
	echo '  fi'
	echo '  n=$((n + 1))'
	echo "  sleep $every & wait \$!"
	echo 'done'
}

# host_client <phase> <tag> <where> <url>: `load client` against url, 6
# requests a second, from the lab's network namespace (an outside client
# on the nodes' bridge), in the background; its log is
# $OUT/<phase>.x-<tag>-node-<where>.log and its pid joins the phase's
# host clients, which stop_load ends.
host_client() {
	local phase=$1 tag=$2 where=$3 url=$4
	ip netns exec "$NETNS" "$LOAD" client -rate 6 -http "$url" \
		>"$OUT/$phase.x-$tag-node-$where.log" 2>"$OUT/$phase.x-$tag-node-$where.err" &
	echo $! >>"$OUT/$phase.hosts"
}
