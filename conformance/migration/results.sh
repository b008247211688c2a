#!/usr/bin/env bash
# results.sh <RESULTS.md> <variant> <report>: puts report in as the node
# variant's block of RESULTS.md, keeping every other variant's last block
# (a file of the older one-run form counts as variant default's block).
# Blocks go in the order of hack/cluster/variant.sh's list, then any other.
set -euo pipefail
shopt -s inherit_errexit
results=$1 variant=$2 report=$3
order="default no-cluster-cidr forward-drop forward-drop-nft legacy metallb-l2 nodelocaldns flannel"

declare -A block=()
if [[ -e $results ]]; then
	if grep -q '^## node=' "$results"; then
		current=""
		while IFS= read -r line; do
			if [[ $line == "## node="* ]]; then
				current=${line#"## node="}
				block[$current]=""
			elif [[ -n $current && $line != '```' ]]; then
				block[$current]+="$line"$'\n'
			fi
		done <"$results"
	else
		# shellcheck disable=SC2016 # sed's own $, the end of a line
		block[default]=$(sed -n '/^```$/,/^```$/{/^```$/d;p}' "$results")$'\n'
	fi
fi
block[$variant]=$(cat "$report")$'\n'

names=()
for v in $order; do [[ -n ${block[$v]:-} ]] && names+=("$v"); done
for v in "${!block[@]}"; do [[ " $order " == *" $v "* ]] || names+=("$v"); done

{
	echo "# The last migration run of each node variant"
	echo
	echo "Written by \`make migration\` (variant default) and \`make migration-matrix\`"
	echo "([../migrate.sh](../migrate.sh), [../matrix.sh](../matrix.sh)); what the lines mean:"
	echo "[../README.md](../README.md#the-migration-run). Each block is the last run of its variant."
	for v in "${names[@]}"; do
		echo
		echo "## node=$v"
		echo
		echo '```'
		printf '%s' "${block[$v]}" | sed -e '/^$/d'
		echo '```'
	done
} >"$results.tmp"
mv "$results.tmp" "$results"
