#!/bin/sh
# install-deps.sh - installs the Debian packages zshard's build and tests need,
# when any is missing. Called by the Makefile before the first build; cheap
# when everything is there. As root it runs apt-get; otherwise it prints the
# exact command and fails.
#
#   tools/install-deps.sh            build and test packages
#   tools/install-deps.sh --check    only report what is missing (exit 1 if any)
set -eu

PKGS="gcc make pkg-config libgrpc-dev libprotobuf-c-dev protobuf-c-compiler \
liblmdb-dev lmdb-utils libcmocka-dev libjansson-dev libopenblas-dev python3 python3-numpy python3-venv \
libibverbs-dev ibverbs-providers"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "${1:-}" = "--check" ]; then
	echo "missing Debian packages:$missing"
	exit 1
fi

cmd="apt-get install -y -o DPkg::Lock::Timeout=300$missing"
if [ "$(id -u)" != 0 ]; then
	echo "zshard: missing Debian packages:$missing" >&2
	echo "zshard: run as root:  apt-get update && $cmd" >&2
	exit 1
fi
echo "zshard: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q -o DPkg::Lock::Timeout=300 $missing >/dev/null
echo "zshard: packages installed"
