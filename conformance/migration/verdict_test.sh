#!/usr/bin/env bash
# verdict_test.sh: verdict.sh's rules, each on a report made for it (make
# lint runs it; a second). Prints each case and exits 1 on the first one
# verdict.sh judges otherwise than the case says.
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

swap_ok="migration: phase=swap node=flannel requests=2956 failed=0 long-lived=12 reset=0 dns=380 dns-failed=0 hostnet-requests=880 hostnet-failed=0 handover=node-1=35s"
rollback_ok="migration: phase=rollback node=flannel requests=5493 failed=0 long-lived=12 reset=0 vxlan-requests=1654 vxlan-failed=0 handover=node-1=60s"
restart_ok="migration: phase=restart node=flannel requests=2100 failed=0 long-lived=12 reset=0 handover=node-1=30s"
control_ok="migration: phase=control node=default requests=900 failed=41 long-lived=12 reset=3 took=80s"

# case <name> <want: pass|fail> <line>...: a report of the lines, judged.
case_() {
	local name=$1 want=$2 got=pass
	shift 2
	printf '%s\n' "date: 2026-11-29T00:00:00Z" "$@" "total: 1s" >"$tmp/report"
	"$HERE/verdict.sh" "$tmp/report" >"$tmp/out" || got=fail
	if [[ $got != "$want" ]]; then
		echo "verdict_test: $name: got $got, want $want"
		cat "$tmp/out"
		exit 1
	fi
	echo "verdict_test: ok: $name ($want)"
}

case_ "clean swap, rollback and control pass" pass "$swap_ok" "$rollback_ok" "$control_ok"
case_ "a failed request in the swap fails" fail "${swap_ok/ failed=0/ failed=2}" "$rollback_ok"
case_ "a reset in the rollback fails" fail "$swap_ok" "${rollback_ok/ reset=0/ reset=1}"
case_ "a variant's own check failing fails" fail "$swap_ok" "${rollback_ok/vxlan-failed=0/vxlan-failed=14}"
case_ "a DNS failure fails" fail "${swap_ok/dns-failed=0/dns-failed=1}"
case_ "a lost request in the config edit fails" fail "$swap_ok" "config-edit: requests=10 failed=1 reset=0 restarted=node-1=5s"
case_ "a control that lost nothing fails" fail "$swap_ok" "${control_ok/failed=41 long-lived=12 reset=3/failed=0 long-lived=12 reset=0}"
case_ "a count that is not a number fails" fail "${swap_ok/ failed=0/ failed=x}"
case_ "a report without result lines fails" fail "stopped: after the swap"
case_ "a baseline restart that lost requests is not judged" pass "${restart_ok/ failed=0/ failed=9}" "$swap_ok" "$rollback_ok" "$control_ok"
case_ "a lost request in the swap fails beside a lossy baseline" fail "${restart_ok/ failed=0/ failed=9}" "${swap_ok/ failed=0/ failed=2}"
if ! grep -q "FAIL .*phase=swap.*failed=2 (the lab's baseline, kube-proxy restarted onto itself, lost failed=9 in this run)" "$tmp/out"; then
	echo "verdict_test: a swap's FAIL line does not name the baseline's losses"
	cat "$tmp/out"
	exit 1
fi
echo "verdict_test: ok: a swap's FAIL line names the baseline's losses"
