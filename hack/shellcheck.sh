#!/usr/bin/env bash
# make lint's shell step: shellcheck (Debian's package, installed with apt
# when missing) over every shell script in git: *.sh, and files whose first
# line runs sh or bash (.ci/run, the node image's /usr/local/sbin tools).
#
#   hack/shellcheck.sh            # check them all; exit 1 on any finding
#   hack/shellcheck.sh FILE...    # check these
#
# Sourced files name their shell (`# shellcheck shell=bash`); `-x` follows
# `source` lines whose `# shellcheck source=` names a file of the repo.
set -euo pipefail
shopt -s inherit_errexit

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=shellcheck
# shellcheck source=hack/lib.sh
. "$REPO/hack/lib.sh"
cd "$REPO"

if ! command -v shellcheck >/dev/null; then
	[[ $(id -u) == 0 ]] || die "shellcheck not found; install Debian's package (apt-get install shellcheck) as root"
	apt_install shellcheck
fi

# scripts: the shell scripts git knows, one a line.
scripts() {
	local f
	git ls-files -z | while IFS= read -r -d '' f; do
		[[ -f $f ]] || continue
		case $f in
		*.sh) echo "$f" ;;
		*.go | *.md | *.yaml | *.json | *.golden | *.txt | go.mod | go.sum) ;;
		*) head -n1 "$f" 2>/dev/null | grep -qE '^#!.*\b(ba)?sh\b' && echo "$f" ;;
		esac
	done
}

files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then
	mapfile -t files < <(scripts)
fi
[[ ${#files[@]} -gt 0 ]] || die "no shell scripts found"
shellcheck -x -P SCRIPTDIR "${files[@]}"
