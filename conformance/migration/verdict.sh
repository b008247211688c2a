#!/usr/bin/env bash
# verdict.sh <report>: judges a migration run's report (migrate.sh's
# report.txt, or a RESULTS.md block) by its result lines, and exits 1
# when the run did not show what it must:
#   - a `migration: phase=swap` or `phase=rollback` line, or the
#     `config-edit:` line, with failed=N, reset=N or any <check>-failed=N
#     (a variant's own counts: hostnet-failed, vxlan-failed, lb-l2-failed,
#     nodelocal-dns-failed, ...) above 0: a request was lost in a hand-over;
#   - a `phase=control` line with failed=0 and reset=0: the old path that
#     drops traffic dropped none, so the counters count nothing;
#   - no result line at all.
# A `phase=restart` line (kube-proxy restarted onto itself: the lab's
# baseline) is reported, not judged: what it loses, the lab's nodes lost
# with no proxy changed, and a FAIL line of the same report says so
# beside its own count, so that the reader can weigh the two.
# One line per result line says what it found. migrate.sh runs it last, so
# `make migration` and `make migration-matrix` fail on a lost request
# (the report is still written to RESULTS.md first).
set -euo pipefail
shopt -s inherit_errexit
report=${1:?usage: verdict.sh <report>}

# lost_words <line>: the line's failed=, reset= and *-failed= words
# above 0 (or not a count), and the sum of the counts in $failures.
lost_words() {
	local word key value
	lost="" failures=0
	for word in $1; do
		key=${word%%=*} value=${word#*=}
		[[ $key == failed || $key == reset || $key == *-failed ]] || continue
		[[ $value =~ ^[0-9]+$ ]] || { lost+=" $word(not a count)"; continue; }
		failures=$((failures + value))
		((value == 0)) || lost+=" $word"
	done
}

baseline=""
while IFS= read -r line; do
	[[ $line == "migration: phase=restart "* ]] || continue
	lost_words "$line"
	[[ -z $lost ]] || baseline=" (the lab's baseline, kube-proxy restarted onto itself, lost$lost in this run)"
done <"$report"

bad=0 seen=0
while IFS= read -r line; do
	case $line in
	"migration: phase="* | "config-edit: "*) ;;
	*) continue ;;
	esac
	seen=$((seen + 1))
	name=${line%% requests=*}
	lost_words "$line"
	if [[ $line == *"phase=restart "* ]]; then
		echo "verdict: baseline $name: lost${lost:- nothing} (not judged: no proxy changed)"
	elif [[ $line == *"phase=control "* ]]; then
		if ((failures == 0)); then
			echo "verdict: FAIL $name: the control lost nothing, so the counters count nothing"
			bad=1
		else
			echo "verdict: ok $name: the control lost requests, as it must"
		fi
	elif [[ -n $lost ]]; then
		echo "verdict: FAIL $name:$lost$baseline"
		bad=1
	else
		echo "verdict: ok $name"
	fi
done <"$report"
if ((seen == 0)); then
	echo "verdict: FAIL $report has no result line"
	bad=1
fi
exit "$bad"
