#!/bin/sh
# multihost.sh - zshard across hosts: the coordinator, two shard servers and
# one trainer each in a network namespace of its own, with an address of its
# own on a bridge (veth pairs), the other trainer outside. The example model
# trains across them bit for bit as the reference. Then a server's link is
# cut while a job trains, twice: for 2 s (under every lease: the job must
# complete, bitwise) and for 8 s (past the coordinator's 5 s server lease:
# the job must complete bitwise after its recovery, or the trainers must end
# with a clear error; never hang, bounded here by 180 s).
#
#   tests/integration/multihost.sh BIN_DIR
#
# Needs root and iproute2 (namespaces, veth, a bridge: 10.0.8.0/24, this
# test's alone); exits 77 with the reason otherwise. Leaves no process,
# namespace, link or directory behind.
set -u
name=multihost bin=$1
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
[ "$(id -u)" = 0 ] || skip "not root (network namespaces need it)"
command -v ip >/dev/null 2>&1 || skip "no ip (iproute2)"

tag=$$
br=zmb$tag
hosts="coord s0 s1 t1"
zs_begin multihost
zs_cleanup_more() { # the hosts' namespaces, their links, the bridge
	for h in $hosts; do
		ip netns pids "zm$h$tag" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip link del "zm$h$tag" 2>/dev/null
		ip netns del "zm$h$tag" 2>/dev/null
	done
	ip link del "$br" 2>/dev/null
}
ip link add "$br" type bridge 2>/dev/null || skip "cannot create a bridge"
ip addr add 10.0.8.1/24 dev "$br" && ip link set "$br" up || fail "cannot set up the bridge"
n=10
for h in $hosts; do
	ns=zm$h$tag
	ip netns add "$ns" 2>/dev/null || skip "cannot create a network namespace"
	ip link add "zm$h$tag" type veth peer name "zp$h$tag" &&
		ip link set "zp$h$tag" netns "$ns" &&
		ip link set "zm$h$tag" master "$br" && ip link set "zm$h$tag" up &&
		ip netns exec "$ns" ip addr add "10.0.8.$n/24" dev "zp$h$tag" &&
		ip netns exec "$ns" ip link set "zp$h$tag" up &&
		ip netns exec "$ns" ip link set lo up || fail "cannot wire host $h"
	eval "ip_$h=10.0.8.$n"
	n=$((n + 1))
done
on() { h=$1; shift; ip netns exec "zm$h$tag" "$@"; }
# shellcheck disable=SC2154 # set by the eval above
coord=$ip_coord:7400

on coord "$bin/zshard-coordinator" --listen "$coord" --data-dir "$dir/coord" --lease-ms 5000 \
	>"$dir/coord.log" 2>&1 &
pids="$pids $!"
for s in s0 s1; do
	eval "a=\$ip_$s"
	# a held gather's bound: over the 8 s cut, not a minute (a rank whose
	# peer ended with the error can only wait for it: after the rollback
	# to step 0, for its initial upload)
	on "$s" "$bin/zshard-server" --coordinator "$coord" --listen "$a:7401" --data-dir "$dir/$s" \
		--capacity 256M --step-timeout-ms 20000 >"$dir/$s.log" 2>&1 &
	pids="$pids $!"
done
addr=$coord
wait_servers 2 || fail "the servers did not register across the bridge"

# train JOB STEPS [CUT SECONDS AFTER STEP]: both ranks (rank 1 in its own
# namespace); prints the ranks' exit codes; with a cut, s1's link goes down
# once rank 0 logged step AFTER, for CUT seconds
train() {
	job=$1 steps=$2 cut=${3:-0} after=${4:-0}
	"$bin/charlm" --print-spec --job "$job" --world 2 --stage 3 >"$dir/$job.json"
	ctl job create "$dir/$job.json" >/dev/null || fail "cannot create $job"
	on t1 timeout 180 "$bin/charlm" --coordinator "$coord" --job "$job" --rank 1 --steps "$steps" \
		--transport auto --print-every 0 --dump "$dir/$job.1.bin" >"$dir/$job.1.log" 2>&1 &
	p1=$!
	timeout 180 "$bin/charlm" --coordinator "$coord" --job "$job" --rank 0 --steps "$steps" \
		--transport auto --print-every 0 --step-log "$dir/$job.steps" \
		--dump "$dir/$job.0.bin" >"$dir/$job.0.log" 2>&1 &
	p0=$!
	if [ "$cut" -gt 0 ]; then
		i=0
		while [ "$(cat "$dir/$job.steps" 2>/dev/null | wc -l)" -lt "$after" ] && [ $i -lt 600 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		ip link set "zms1$tag" down
		sleep "$cut"
		ip link set "zms1$tag" up
	fi
	wait $p0
	r0=$?
	wait $p1
	r1=$?
	echo "$r0 $r1"
}
reference() {
	"$bin/charlm" --reference --spec "$dir/$1.json" --world 2 --steps "$2" \
		--dump "$dir/$1.ref.bin" >"$dir/$1.ref.log" 2>&1 || fail "the reference of $1"
	cmp -s "$dir/$1.0.bin" "$dir/$1.ref.bin"
}

rc=$(train across 30)
[ "$rc" = "0 0" ] || fail "training across namespaces ended with $rc"
reference across 30 || fail "training across namespaces differs from the reference"
said="trained across 5 hosts bitwise equal"

rc=$(train cut2 300 2 20)
[ "$rc" = "0 0" ] || fail "a 2 s cut of a server's link ended the job ($rc)"
reference cut2 300 || fail "after a 2 s cut the parameters differ from the reference"
said="$said; a 2 s cut: completed, bitwise"

rc=$(train cut8 300 8 20)
case $rc in
"0 0")
	reference cut8 300 || fail "after an 8 s cut the job completed with other parameters"
	said="$said; an 8 s cut (past the server lease): recovered and completed, bitwise"
	;;
*124*) fail "an 8 s cut left a trainer hanging (killed at 180 s)" ;;
*)
	grep -h -i "is down\|timed out\|unavailable\|no answer" "$dir/cut8.0.log" "$dir/cut8.1.log" | head -1 |
		grep -q . || fail "an 8 s cut ended the job ($rc) without a clear error"
	said="$said; an 8 s cut: a clear error ($(grep -h -i "is down\|timed out\|unavailable\|no answer" "$dir/cut8.0.log" "$dir/cut8.1.log" | head -1 | cut -c1-120))"
	;;
esac
echo "multihost: $said"
