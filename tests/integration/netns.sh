#!/bin/sh
# netns.sh - a shard server in another network namespace of the same host,
# as in a container or a pod: it reports this host's name, but its shm
# socket (an abstract unix socket, which lives in its namespace) does not
# reach the trainers. libzshard's "auto" then falls back to tcp for that
# server (and keeps shm for the server beside the trainers), and the example
# model trained through both equals the single-process reference bit for
# bit. Asked for shm by name, the join fails with a clear error instead.
#
#   tests/integration/netns.sh BIN_DIR
#
# Needs root and iproute2 (it makes a namespace and a veth pair of its own,
# 10.0.9.1 <-> 10.0.9.2, which carry only this test's traffic); exits 77
# with the reason otherwise. Leaves no process, namespace or link behind.
set -u
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "netns: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root (a network namespace needs it)"
command -v ip >/dev/null 2>&1 || skip "no ip (iproute2)"

ns=zsns$$ va=zsa$$ vb=zsb$$
dir=$(mktemp -d /tmp/zshard-netns-XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
	ip link del "$va" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "netns: FAILED: $*"
	for f in "$dir"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done
	exit 1
}
ip netns add "$ns" 2>/dev/null || skip "cannot create a network namespace"
ip link add "$va" type veth peer name "$vb" || skip "cannot create a veth pair"
ip link set "$vb" netns "$ns" &&
	ip addr add 10.0.9.1/24 dev "$va" && ip link set "$va" up &&
	ip netns exec "$ns" ip addr add 10.0.9.2/24 dev "$vb" &&
	ip netns exec "$ns" ip link set "$vb" up &&
	ip netns exec "$ns" ip link set lo up || fail "cannot set up the veth pair"

wait_file() { # file seconds
	i=0
	while [ ! -s "$1" ] && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
	[ -s "$1" ]
}

"$bin/zshard-coordinator" --listen 10.0.9.1:0 --data-dir "$dir/coord" \
	--port-file "$dir/coord.addr" >"$dir/coord.log" 2>&1 &
pids="$pids $!"
wait_file "$dir/coord.addr" 10 || fail "the coordinator did not start"
addr=$(cat "$dir/coord.addr")
# one server beside the trainers, one in the other namespace
"$bin/zshard-server" --coordinator "$addr" --listen 10.0.9.1:0 --data-dir "$dir/s0" \
	--capacity 256M >"$dir/s0.log" 2>&1 &
pids="$pids $!"
ip netns exec "$ns" "$bin/zshard-server" --coordinator "$addr" --listen 10.0.9.2:0 \
	--data-dir "$dir/s1" --capacity 256M >"$dir/s1.log" 2>&1 &
pids="$pids $!"
ctl() { "$bin/zshardctl" --coordinator "$addr" "$@"; }
i=0
while [ "$(ctl servers 2>/dev/null | grep -c ' up ')" -lt 2 ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ "$(ctl servers | grep -c ' up ')" -eq 2 ] || fail "two servers did not come up"
ctl job create "$root/examples/charlm.json" >/dev/null || fail "job create"

steps=20
"$bin/charlm" --coordinator "$addr" --rank 1 --steps $steps --transport auto \
	--dump "$dir/rank1.bin" >"$dir/rank1.log" 2>&1 &
r1=$!
"$bin/charlm" --coordinator "$addr" --rank 0 --steps $steps --transport auto \
	--dump "$dir/rank0.bin" >"$dir/rank0.log" 2>&1 || fail "rank 0 did not train over auto"
wait $r1 || fail "rank 1 did not train over auto"
"$bin/charlm" --reference --spec "$root/examples/charlm.json" --world 2 --steps $steps \
	--dump "$dir/reference.bin" >"$dir/reference.log" 2>&1 || fail "the reference"
cmp -s "$dir/rank0.bin" "$dir/reference.bin" || fail "the parameters differ from the reference"

if "$bin/charlm" --coordinator "$addr" --rank 0 --steps 1 --transport shm \
	>"$dir/shm.log" 2>&1; then
	fail "a join over shm reached a server in another namespace"
fi
grep -q "refused\|cannot connect" "$dir/shm.log" || fail "the shm join's error: $(cat "$dir/shm.log")"
echo "netns: a server in another network namespace: auto fell back to tcp, bitwise equal to the reference; shm by name fails clearly"
