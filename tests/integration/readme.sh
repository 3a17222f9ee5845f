#!/bin/sh
# readme.sh - the README's local-cluster quick start, run as written: its
# first sh block after "## Quick start: a local cluster", from the source
# tree's build, with the local cluster's folder a fresh one; it must train,
# show the placement and export, and its last line stop the cluster.
#
#   tests/integration/readme.sh BIN_DIR
#
# Leaves no process or directory behind.
set -u
name=readme bin=$1
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
zs_begin readme
root=$(cd "$(dirname "$0")/../.." && pwd)
awk '/^## Quick start: a local cluster/ {on = 1; next} on && /^```sh/ {inb = 1; next}
	inb && /^```/ {exit} inb {print}' "$root/README.md" >"$dir/quick.sh"
[ -s "$dir/quick.sh" ] || fail "README has no sh block under '## Quick start: a local cluster'"
grep -q 'zshard-local stop' "$dir/quick.sh" || fail "the quick start does not stop its cluster"
# from a folder of its own that sees the tree's build/, deploy/ and
# examples/ (its export lands there), its make left out (built already)
for f in build deploy examples; do ln -s "$root/$f" "$dir/$f"; done
sed -i '/^make\( \|$\)/d' "$dir/quick.sh"
# a quick start that fails midway leaves its cluster: stopped on the way out
zs_cleanup_more() {
	[ -f "$dir/local/run/coordinator.pid" ] &&
		ZSHARD_LOCAL_DIR="$dir/local" "$root/deploy/local/zshard-local" stop >/dev/null 2>&1
	return 0
}
(cd "$dir" && ZSHARD_LOCAL_DIR="$dir/local" bash -e "$dir/quick.sh") >"$dir/quick.log" 2>&1 ||
	fail "the quick start failed: $(tail -20 "$dir/quick.log")"
grep -q "rank 0: 200 steps" "$dir/quick.log" || fail "no training: $(tail -20 "$dir/quick.log")"
grep -q "^job charlm, placement epoch" "$dir/quick.log" || fail "no placement: $(tail "$dir/quick.log")"
[ -s "$dir/charlm.safetensors" ] || fail "no export"
[ -f "$dir/local/run/coordinator.pid" ] && fail "the quick start left its cluster running"
echo "readme: passed (the local-cluster quick start as written: trained, placement, export, stopped)"
