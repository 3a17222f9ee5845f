#!/bin/sh
# run.sh BUILD_DIR - make test-rdma: the rdma transport on real verbs code
# paths without RDMA hardware. Boots a stock Debian kernel under qemu with
# Soft-RoCE (rdma_rxe) and runs, in one guest, the transport conformance
# suite, the oracle training test and relaying readers over rdma
# (tests/rdma/guest.sh); then, in two guests joined by a virtual link, one
# gather and one push across it.
# Installs what it needs as root (qemu, busybox, the rxe provider; the
# kernel package is downloaded once into BUILD_DIR/rxe-cache).
# Exit: 0 passed, 77 skipped (the reason is printed), else failed.
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
skip() { echo "test-rdma: SKIPPED: $*"; exit 77; }

[ -x "$build/tests/test_transport" ] || skip "no $build/tests/test_transport (build first)"
"$build/bin/zshardctl" rdma --lock 0 2>/dev/null | grep -q "built without RDMA" &&
	skip "this build has no RDMA (libibverbs-dev was missing at build time)"
pkgs="qemu-system-x86 busybox-static cpio kmod iproute2 xz-utils ibverbs-providers rdma-core"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	[ "$(id -u)" = 0 ] || skip "needs$missing (as root: apt-get install$missing)"
	echo "test-rdma: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 $missing >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null 2>&1 &&
		  apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 $missing >/dev/null 2>&1; } ||
		skip "could not install$missing"
fi
export RXE_CACHE="${RXE_CACHE:-$root/$build/rxe-cache}"
mkdir -p "$RXE_CACHE"
b="$root/$build"
fails=0
start=$(date +%s)

echo "test-rdma: one guest: conformance suite + oracle training and relaying readers over rdma; kernel TLS"
"$here/rxe-run.sh" -q -k -m 1536 -t 300 -b "$b/tests/test_transport" -b "$b/tests/test_train" -b "$b/tests/test_dtls" \
	-b "$b/bin/zshard-coordinator" -b "$b/bin/zshard-server" "$here/guest.sh" >"$RXE_CACHE/one.log" 2>&1
rc=$?
work=$(sed -n 's/^rxe-run: kept //p' "$RXE_CACHE/one.log" | tail -1)
[ -n "$work" ] && grep -a -v '^\[ *[0-9]*\.[0-9]*\]' "$work/console.log" | grep -a -v '^@@RXE\|^$' | tr -d '\r'
tail -2 "$RXE_CACHE/one.log"
[ -n "$work" ] && rm -rf "$work"
case $rc in
0) ;;
125) skip "the guest did not boot or gave no result: $(tail -1 "$RXE_CACHE/one.log")" ;;
*) fails=$((fails + 1)) ;;
esac

echo "test-rdma: two guests: a gather and a push across the virtual link"
"$here/rxe-run.sh" -q -k -2 -m 768 -t 240 "$b/tests/test_transport" --two-node >"$RXE_CACHE/two.log" 2>&1
rc=$?
work=$(sed -n 's/^rxe-run: kept //p' "$RXE_CACHE/two.log" | tail -1)
[ -n "$work" ] && grep -a -h "two-node" "$work/server.log" "$work/client.log" | tr -d '\r'
tail -2 "$RXE_CACHE/two.log"
[ -n "$work" ] && rm -rf "$work"
[ "$rc" -eq 0 ] || fails=$((fails + 1))

echo "test-rdma: $([ $fails -eq 0 ] && echo passed || echo "$fails part(s) FAILED") in $(($(date +%s) - start)) s"
[ $fails -eq 0 ]
