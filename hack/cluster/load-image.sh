#!/usr/bin/env bash
# Imports docker archives into every node of the running lab cluster
# (nodes otherwise get images only from their config disk at boot): the
# host serves the archives over HTTP inside the lab's network namespace; a
# privileged DaemonSet on every node fetches them into a hostPath and runs
# the node's own `ctr -n k8s.io images import` through nsenter.
#
#   hack/cluster/load-image.sh .cache/cluster/images/kube-ipvs-proxy.tar [more.tar ...]
#   make image && hack/cluster/load-image.sh "$(make -s image | awk '/^archive:/ {print $2}')"
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -e $RUN/cluster.env ]] || die "no cluster (make cluster)"
# shellcheck source=/dev/null
. "$RUN/cluster.env"
[[ $# -gt 0 ]] || die "usage: load-image.sh ARCHIVE.tar..."

dir=$(mktemp -d "$CACHE/.serve.XXXXXX")
trap 'kill "$server" 2>/dev/null || true; rm -rf "$dir"; kc -n kube-system delete ds kip-load-image --ignore-not-found >&2 || true' EXIT
names=()
for a in "$@"; do
	[[ -f $a ]] || die "$a: no such archive"
	ln "$a" "$dir/$(basename "$a")" 2>/dev/null || cp "$a" "$dir/"
	names+=("$(basename "$a")")
done
port=18099
ip netns exec "$NETNS" /usr/bin/python3 -m http.server --bind "$GW4" --directory "$dir" "$port" >"$RUN/logs/load-image-http.log" 2>&1 &
server=$!
script="set -e; mkdir -p /host/var/tmp/kip-images"
for n in "${names[@]}"; do
	script+="; curl -sSf -o /host/var/tmp/kip-images/$n http://$GW4:$port/$n"
	script+="; nsenter -t 1 -m -- ctr -n k8s.io images import /var/tmp/kip-images/$n"
	script+="; rm -f /host/var/tmp/kip-images/$n"
done
script+="; echo imported; sleep infinity"
kc apply -f - >&2 <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kip-load-image, namespace: kube-system}
spec:
  selector: {matchLabels: {app: kip-load-image}}
  template:
    metadata: {labels: {app: kip-load-image}}
    spec:
      hostNetwork: true
      hostPID: true
      terminationGracePeriodSeconds: 0
      tolerations: [{operator: Exists}]
      containers:
      - name: load
        image: registry.k8s.io/e2e-test-images/agnhost:2.63.0
        imagePullPolicy: IfNotPresent
        command: [/bin/bash, -c, "$script"]
        securityContext: {privileged: true}
        readinessProbe:
          exec: {command: [/bin/true]}
        volumeMounts: [{name: host, mountPath: /host}]
      volumes: [{name: host, hostPath: {path: /}}]
YAML
for ((i = 0; i < 600; i++)); do
	done_n=0
	for p in $(kc -n kube-system get pods -l app=kip-load-image -o jsonpath='{.items[*].metadata.name}'); do
		kc -n kube-system logs "$p" 2>/dev/null | grep -q '^imported$' && done_n=$((done_n + 1))
	done
	((done_n == NODES)) && break
	sleep 2
done
((done_n == NODES)) || die "import did not finish on every node (kubectl -n kube-system logs -l app=kip-load-image)"
log "imported ${names[*]} on $NODES node(s)"
