#!/usr/bin/env bash
# Prints the proxy's version stamp, from the VERSION file and git:
#
#   hack/version.sh            # -X k8s.io/component-base/version.gitVersion=... (the ldflags)
#   hack/version.sh version    # the version alone, e.g. v0.1.0 or v0.1.0-3-g0123456789ab-dirty
#   hack/version.sh tag        # the image tag: the version (it is a valid tag as it is)
#   hack/version.sh commit     # the full commit
#   hack/version.sh date       # the commit's time, UTC (the build date, the image's creation time)
#
# VERSION holds the semver of the release being made or last made (tags may
# not travel with a clone; the file does). The release is the commit that
# last changed VERSION: it is v<VERSION>. Every later commit is
# v<VERSION>-<n>-g<12 hex>, n commits after the release, as `git describe`
# would say of a v<VERSION> tag on the release commit; the commit is
# abbreviated to a fixed 12 digits so that every clone stamps the same
# string (git's own abbreviation grows with the repository). -dirty when the
# work tree differs from the commit. In a shallow clone, which cannot count,
# HEAD is v<VERSION> only under a tag of that name, else
# v<VERSION>-shallow-g<12 hex>. Outside a git checkout: v<VERSION>-unknown.
#
# Every form is a semver (the part after the first "-" a pre-release) and a
# valid image tag, so --version, kubernetes_build_info and the image tag
# carry one string. It goes where kube-proxy's goes
# (k8s.io/component-base/version).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

base=$(tr -d ' \t\n' <VERSION)
if [[ ! $base =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
	echo "version.sh: VERSION holds \"$base\"; want MAJOR.MINOR.PATCH, e.g. 0.1.0" >&2
	exit 1
fi
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}

if commit=$(git rev-parse HEAD 2>/dev/null); then
	short=$(git rev-parse --short=12 HEAD)
	version=v$base
	if [[ $(git rev-parse --is-shallow-repository) == true ]]; then
		git tag --points-at HEAD | grep -qx "v$base" || version+=-shallow-g$short
	else
		release=$(git log -1 --format=%H -- VERSION)
		if [[ -z $release ]]; then # VERSION not committed yet
			n=$(git rev-list --count HEAD)
		else
			n=$(git rev-list --count "$release..HEAD")
		fi
		((n == 0)) || version+=-$n-g$short
	fi
	git diff --quiet HEAD 2>/dev/null || version+=-dirty
	state=clean
	[[ $version == *-dirty ]] && state=dirty
	# The commit's time, not the build's: the same commit builds the same binary.
	date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
else
	commit="" version=v$base-unknown state=dirty date=1970-01-01T00:00:00Z
fi

case ${1:-ldflags} in
version | tag) echo "$version" ;;
commit) echo "$commit" ;;
date) echo "$date" ;;
ldflags)
	p=k8s.io/component-base/version
	echo "-X $p.gitVersion=$version -X $p.gitCommit=$commit -X $p.gitTreeState=$state -X $p.buildDate=$date -X $p.gitMajor=$major -X $p.gitMinor=$minor"
	;;
*)
	echo "usage: version.sh [ldflags|version|tag|commit|date]" >&2
	exit 2
	;;
esac
