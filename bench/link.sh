#!/usr/bin/env bash
# link.sh OUT_DIR - overlap where the network is the bottleneck, not these
# two cores: the coordinator and 2 shard servers in a network namespace of
# their own behind a veth pair shaped with tc's token bucket (tbf, both
# directions) at each rate of $RATES, the 2 trainers of the example model
# (examples/charlm.c, ZeRO-3, tcp) outside. Per rate: the link's own
# throughput (a raw TCP stream through the same veth, one direction, then
# the other), communication alone (the step driver without the model), and
# the full step at prefetch 0, 1 and 2; compute alone (the model without
# the service, both ranks at once) once ($QUEUE: the shaper's queue
# depth, 50ms unless given). The target: the step at prefetch 1 within
# 1.10x max(compute alone, communication alone). Then, per rate, the step
# at prefetch 1 and communication alone with the data plane encrypted
# (data_tls) beside plaintext: the target, within 1.05x where the link
# bounds the step.
# Writes OUT_DIR/link.md and OUT_DIR/link.dat (rate, tcp MB/s, compute,
# communication, steps at prefetch 0 1 2, in seconds).
#
# Needs root, iproute2 and tc; exits 77 with the reason otherwise. Leaves no
# process, namespace or link behind.
set -u
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${ZSHARD_BIN:-$root/build/bin}
PY=${PYTHON:-/usr/bin/python3}
RATES=${RATES:-"1gbit 2gbit 4gbit 8gbit"}
# the shaper's queue, as the longest a packet waits in it (tbf's latency):
# 50 ms is a deep buffer; a datacenter switch port holds a few ms at these
# rates
QUEUE=${QUEUE:-50ms}
DEPTH=${DEPTH:-8} HIDDEN=${HIDDEN:-1024} BATCH=${BATCH:-384} STEPS=${STEPS:-12} WARM=${WARM:-3}
skip() { echo "link: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root (a network namespace needs it)"
command -v ip >/dev/null 2>&1 || skip "no ip (iproute2)"
command -v tc >/dev/null 2>&1 || skip "no tc (iproute2)"

ns=zsl$$ va=zla$$ vb=zlb$$ a=10.0.6.1 b=10.0.6.2
dir=$(mktemp -d /tmp/zshard-link-XXXXXX)
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
	echo "link: FAILED: $*" >&2
	for f in "$dir"/*.log "$dir"/*.out*; do [ -f "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
	exit 1
}
ip netns add "$ns" 2>/dev/null || skip "cannot create a network namespace"
ip link add "$va" type veth peer name "$vb" || skip "cannot create a veth pair"
ip link set "$vb" netns "$ns" &&
	ip addr add $a/24 dev "$va" && ip link set "$va" up &&
	ip netns exec "$ns" ip addr add $b/24 dev "$vb" &&
	ip netns exec "$ns" ip link set "$vb" up &&
	ip netns exec "$ns" ip link set lo up || fail "cannot set up the veth pair"
tc qdisc replace dev "$va" root tbf rate 1gbit burst 512kb latency "$QUEUE" 2>/dev/null ||
	skip "tc cannot shape the veth (no tbf qdisc in this kernel)"

wait_file() { # file seconds
	local i=0
	while [ ! -s "$1" ] && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
	[ -s "$1" ]
}
ip netns exec "$ns" "$bin/zshard-coordinator" --listen $b:0 --data-dir "$dir/coord" \
	--port-file "$dir/coord.addr" >"$dir/coord.log" 2>&1 &
pids="$pids $!"
wait_file "$dir/coord.addr" 10 || fail "the coordinator did not start"
addr=$(cat "$dir/coord.addr")
for s in 0 1; do
	ip netns exec "$ns" "$bin/zshard-server" --coordinator "$addr" --listen $b:0 \
		--data-dir "$dir/s$s" --capacity 1G >"$dir/s$s.log" 2>&1 &
	pids="$pids $!"
done
ctl() { "$bin/zshardctl" --coordinator "$addr" "$@"; }
i=0
until [ "$(ctl servers 2>/dev/null | grep -c ' up ')" -ge 2 ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
[ $i -lt 100 ] || fail "the servers did not register"

# the link's own throughput: one TCP stream of 256 MiB through the veth,
# sent by FROM (a, this side, or b, the namespace) to the other side
stream() {
	local from=$1 to port=$((20000 + RANDOM % 10000)) recv send
	recv='import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); open(sys.argv[3], "w").write("1")
c, _ = s.accept(); n = 0; t0 = None; buf = bytearray(1 << 20)
while True:
    k = c.recv_into(buf)
    if not k: break
    if t0 is None: t0 = time.monotonic()
    n += k
print("%.1f" % (n / (time.monotonic() - t0) / 1e6))'
	send='import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2]))); b = bytes(1 << 20)
for _ in range(256): c.sendall(b)
c.close()'
	rm -f "$dir/ready"
	if [ "$from" = a ]; then
		to=$b
		ip netns exec "$ns" "$PY" -c "$recv" $to $port "$dir/ready" >"$dir/stream" &
	else
		to=$a
		"$PY" -c "$recv" $to $port "$dir/ready" >"$dir/stream" &
	fi
	local rp=$!
	wait_file "$dir/ready" 5 || fail "the stream receiver did not start"
	if [ "$from" = a ]; then "$PY" -c "$send" $to $port; else ip netns exec "$ns" "$PY" -c "$send" $to $port; fi
	wait $rp
	cat "$dir/stream"
}

stat() { awk -v c="$1" -v w="$WARM" '$1 >= w { v[n++] = $c } END {
	if (!n) { print "nan"; exit }
	for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
	print v[int(n / 2)] }' "${@:2}"; }

# run JOB PREFETCH [--no-compute] [tls]: the two ranks; the median step (s);
# tls: the job's data plane encrypted (its spec's data_tls)
run() {
	local job=$1 pf=$2 extra=${3:-} tls=${4:-}
	"$bin/charlm" --print-spec --job "$job" --world 2 --stage 3 --depth "$DEPTH" --hidden "$HIDDEN" \
		>"$dir/$job.json"
	if [ "$tls" = tls ]; then
		"$PY" -c 'import json, sys
s = json.load(open(sys.argv[1])); s["data_tls"] = True
json.dump(s, open(sys.argv[1], "w"))' "$dir/$job.json" || fail "cannot set data_tls"
	fi
	ctl job create "$dir/$job.json" >/dev/null || fail "cannot create $job"
	local ranks=""
	for r in 1 0; do
		"$bin/charlm" --coordinator "$addr" --job "$job" --rank $r --steps "$STEPS" --batch "$BATCH" \
			--depth "$DEPTH" --hidden "$HIDDEN" --prefetch "$pf" --transport tcp \
			--print-every 0 --step-log "$dir/$job.$r" $extra >"$dir/$job.out$r" 2>&1 &
		ranks="$ranks $!"
	done
	for r in $ranks; do wait "$r" || fail "$job did not train"; done
	ctl job delete "$job" >/dev/null
	stat 4 "$dir/$job.0" "$dir/$job.1"
}

locals=""
for r in 0 1; do
	"$bin/charlm" --local --steps "$STEPS" --batch "$BATCH" --depth "$DEPTH" --hidden "$HIDDEN" \
		--step-log "$dir/local.$r" >/dev/null &
	locals="$locals $!"
done
for r in $locals; do wait "$r"; done
comp=$(stat 2 "$dir/local.0" "$dir/local.1")
params=$("$bin/charlm" --print-spec --depth "$DEPTH" --hidden "$HIDDEN" | awk -F'[][]' '/shape/ { n = split($0, a, /"shape": \[/); for (i = 2; i <= n; i++) { split(a[i], d, /\]/); k = split(d[1], x, /, */); p = 1; for (j = 1; j <= k; j++) p *= x[j]; s += p } } END { print s }')

echo "| link (tbf) | raw TCP MB/s, to the servers / back | compute alone ms | communication alone ms | step ms, prefetch 0 | prefetch 1 | prefetch 2 | prefetch 1 / max(compute, communication) | prefetch 1 / (compute + communication) |"
echo "|---|---|---|---|---|---|---|---|---|"
: >"$out/link.dat"
k=0
tlsrows=""
for rate in $RATES; do
	tc qdisc replace dev "$va" root tbf rate "$rate" burst 512kb latency "$QUEUE" ||
		fail "tc cannot set $rate"
	ip netns exec "$ns" tc qdisc replace dev "$vb" root tbf rate "$rate" burst 512kb latency "$QUEUE" ||
		fail "tc cannot set $rate in the namespace"
	up=$(stream a) down=$(stream b)
	comm=$(run "c$k" 1 --no-compute)
	s0=$(run "p0-$k" 0) s1=$(run "p1-$k" 1) s2=$(run "p2-$k" 2)
	awk -v r="$rate" -v up="$up" -v dn="$down" -v c="$comp" -v m="$comm" -v s0="$s0" -v s1="$s1" -v s2="$s2" 'BEGIN {
		mx = c > m ? c : m
		printf "| %s | %s / %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n",
			r, up, dn, c * 1e3, m * 1e3, s0 * 1e3, s1 * 1e3, s2 * 1e3, s1 / mx, s1 / (c + m) }'
	echo "$rate $up $down $comp $comm $s0 $s1 $s2" >>"$out/link.dat"
	# the same step with the data plane encrypted (data_tls), beside
	# plaintext again, in turns
	pl=$(run "q$k" 1 "" "") en=$(run "e$k" 1 "" tls)
	cpl=$(run "qc$k" 1 --no-compute "") cen=$(run "ec$k" 1 --no-compute tls)
	tlsrows="$tlsrows$(awk -v r="$rate" -v a="$pl" -v b="$en" -v c="$cpl" -v d="$cen" 'BEGIN {
		printf "| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |", r, a * 1e3, b * 1e3, b / a, c * 1e3, d * 1e3, d / c }')
"
	k=$((k + 1))
done
echo
echo "| link (tbf) | step ms, prefetch 1, plaintext | encrypted (data_tls) | encrypted / plaintext | communication alone ms, plaintext | encrypted | encrypted / plaintext |"
echo "|---|---|---|---|---|---|---|"
printf '%s' "$tlsrows"
echo
echo "(charlm --depth $DEPTH --hidden $HIDDEN: $params parameters, f32, ZeRO-3 over tcp; batch $BATCH per rank; 2 trainers outside the namespace, the coordinator and 2 servers inside, every byte through one veth pair shaped by tbf in both directions, its queue $QUEUE deep; medians over both ranks' steps $WARM..$((STEPS - 1)); compute alone: both ranks' forward and backward at once without the service; communication alone: the same step driver without the model. A ZeRO-3 step moves about 3 x the parameters' bytes per rank: two gathers one way, one push the other.)"
