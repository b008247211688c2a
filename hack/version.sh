#!/usr/bin/env bash
# Prints the proxy's version stamp from git, for `go build -ldflags`:
#
#   hack/version.sh            # -X k8s.io/component-base/version.gitVersion=... (the ldflags)
#   hack/version.sh version    # the version alone, e.g. v0.0.0-207-g15fccc9-dirty
#   hack/version.sh commit     # the full commit
#
# The version is the newest v* tag's `git describe`; without a tag,
# v0.0.0-<commits>-g<short commit>; -dirty when the work tree differs.
# It goes where kube-proxy's goes (k8s.io/component-base/version), so
# --version, the kubernetes_build_info metric and the image's OCI labels
# read one value. Outside a git checkout: v0.0.0-unknown.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if commit=$(git rev-parse HEAD 2>/dev/null); then
	if ! version=$(git describe --tags --match 'v*' --dirty 2>/dev/null); then
		version=v0.0.0-$(git rev-list --count HEAD)-g$(git rev-parse --short=7 HEAD)
		git diff --quiet HEAD 2>/dev/null || version+=-dirty
	fi
	state=clean
	[[ $version == *-dirty ]] && state=dirty
	# The commit's time, not the build's: the same commit builds the same binary.
	date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
else
	commit="" version=v0.0.0-unknown state=dirty date=1970-01-01T00:00:00Z
fi

case ${1:-ldflags} in
version) echo "$version" ;;
commit) echo "$commit" ;;
ldflags)
	p=k8s.io/component-base/version
	major=${version#v}
	major=${major%%.*}
	minor=${version#v*.}
	minor=${minor%%.*}
	echo "-X $p.gitVersion=$version -X $p.gitCommit=$commit -X $p.gitTreeState=$state -X $p.buildDate=$date -X $p.gitMajor=$major -X $p.gitMinor=$minor"
	;;
*)
	echo "usage: version.sh [ldflags|version|commit]" >&2
	exit 2
	;;
esac
