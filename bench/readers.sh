#!/usr/bin/env bash
# readers.sh OUT_DIR - weight readers where links, not these two cores,
# bound the delivery: the coordinator and 2 shard servers in a network
# namespace, each reader in one of its own, every namespace on a bridge
# through a veth pair shaped by tc's token bucket (tbf, both directions)
# at $RATE. One version of a $TENSORS x $NUMEL f32 model is delivered to
# 1, 2, 4, 8, 16 readers ($COUNTS), each way $RUNS times (medians):
#   relayed, a pipeline: each reader relays to the next (fanout 1);
#   relayed, a tree of fanout 2;
#   direct: every reader reads from the servers;
#   rank 0: the plain alternative (verl's rank-0 broadcast): one process
#   gathers the whole model from the servers and sends it to each reader
#   over tcp.
# The bound: the model's bytes over the servers' link, plus the pipeline's
# depth in tensors (each relay forwards a tensor once it has it whole).
# The target: the pipeline within 1.3x the bound at 16 readers, the
# servers' bytes sent the model's once whatever the number of readers.
# Then the trainers' step (examples/charlm.c, 2 ranks, ZeRO-3) with a
# reader pulling every version against none, in turns ($TRAIN_RUNS each,
# at each batch of $TRAIN_BATCHES: the reader's cost is per byte, the
# step's compute per token; the target: at most 1.05x), the reader once at
# the trainers' priority and once at nice 19 (its CPU as on the machine of
# its own an inference worker has: what serving it costs the step), and
# in the servers' namespace, where it takes their copies from their arenas
# over shm (one-sided, as rdma's reads across hosts: the servers send
# nothing), at the trainers' priority and at nice 19.
# Writes OUT_DIR/readers.md and OUT_DIR/readers.dat.
#
# Needs root, iproute2, tc and a bridge; exits 77 with the reason
# otherwise. Leaves no process, namespace or link behind.
set -u
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${ZSHARD_BIN:-$root/build/bin}
PY=${PYTHON:-$root/build/torch-venv/bin/python}
RATE=${RATE:-200mbit} QUEUE=${QUEUE:-20ms}
TENSORS=${TENSORS:-48} NUMEL=${NUMEL:-174762}
COUNTS=${COUNTS:-"1 2 4 8 16"} RUNS=${RUNS:-3}
TRAIN_RUNS=${TRAIN_RUNS:-3} STEPS=${STEPS:-60} WARM=${WARM:-3}
DEPTH=${DEPTH:-4} HIDDEN=${HIDDEN:-512} TRAIN_BATCHES=${TRAIN_BATCHES:-"256 2048"}
skip() { echo "readers: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root (a network namespace needs it)"
command -v ip >/dev/null 2>&1 || skip "no ip (iproute2)"
command -v tc >/dev/null 2>&1 || skip "no tc (iproute2)"
[ -x "$PY" ] || skip "no python with numpy at $PY (make torch-venv makes one)"
"$PY" -c 'import numpy' 2>/dev/null || skip "$PY has no numpy"

tag=$$ br=zrb$$ net=10.0.7
maxn=0
for n in $COUNTS; do [ "$n" -gt $maxn ] && maxn=$n; done
mkdir -p "$out" || exit 1
dir=$(mktemp -d /tmp/zshard-readers-XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	for ns in zrs$tag $(seq -f "zrr${tag}_%g" 0 "$maxn"); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	ip link del "$br" 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "readers: FAILED: $*" >&2
	for f in "$dir"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
	exit 1
}
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
export ZSHARD_LIB=${ZSHARD_LIB:-$(dirname "$bin")/lib/libzshard.so.0}

# the bridge, and NAME's namespace on it at ADDR behind a shaped veth pair
ip link add "$br" type bridge 2>/dev/null || skip "cannot create a bridge"
ip addr add $net.254/24 dev "$br" && ip link set "$br" up || fail "cannot set up the bridge"
attach() { # ns addr k
	local ns=$1 a=$2 k=$3
	ip netns add "$ns" || skip "cannot create a network namespace"
	ip link add "zv$k$tag" type veth peer name "zw$k$tag" || skip "cannot create a veth pair"
	ip link set "zw$k$tag" netns "$ns" &&
		ip link set "zv$k$tag" master "$br" && ip link set "zv$k$tag" up &&
		ip netns exec "$ns" ip addr add "$a/24" dev "zw$k$tag" &&
		ip netns exec "$ns" ip link set "zw$k$tag" up &&
		ip netns exec "$ns" ip link set lo up || fail "cannot set up $ns"
	tc qdisc replace dev "zv$k$tag" root tbf rate "$RATE" burst 256kb latency "$QUEUE" 2>/dev/null ||
		skip "tc cannot shape a veth (no tbf qdisc in this kernel)"
	ip netns exec "$ns" tc qdisc replace dev "zw$k$tag" root tbf rate "$RATE" burst 256kb \
		latency "$QUEUE" || fail "cannot shape $ns"
}
attach zrs$tag $net.1 0
for k in $(seq 1 "$maxn"); do attach "zrr${tag}_$k" "$net.$((10 + k))" "$k"; done
attach "zrr${tag}_0" $net.10 99 # rank 0 of the plain alternative
inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

wait_file() { # file seconds
	local i=0
	while [ ! -s "$1" ] && [ $i -lt $(($2 * 100)) ]; do sleep 0.01; i=$((i + 1)); done
	[ -s "$1" ]
}
ip netns exec zrs$tag "$bin/zshard-coordinator" --listen $net.1:0 --data-dir "$dir/coord" \
	--port-file "$dir/coord.addr" >"$dir/coord.log" 2>&1 &
pids="$pids $!"
wait_file "$dir/coord.addr" 10 || fail "the coordinator did not start"
addr=$(cat "$dir/coord.addr")
for s in 0 1; do
	ip netns exec zrs$tag "$bin/zshard-server" --coordinator "$addr" --listen $net.1:0 \
		--data-dir "$dir/s$s" --capacity 2G --rdma off >"$dir/s$s.log" 2>&1 &
	pids="$pids $!"
done
ctl() { "$bin/zshardctl" --coordinator "$addr" "$@"; }
i=0
until [ "$(ctl servers 2>/dev/null | grep -c ' up ')" -ge 2 ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
[ $i -lt 100 ] || fail "the servers did not register"
"$PY" "$root/bench/readers.py" setup "$addr" m "$TENSORS" "$NUMEL" >"$dir/setup.log" 2>&1 ||
	fail "cannot set up the job"
bytes=$((TENSORS * NUMEL * 4))

# one delivery to N readers, MODE pipe (fanout 1), tree (2), direct (0) or
# rank0: seconds from the go to the last reader's last byte, and the
# bytes the servers sent (the readers' own count)
deliver() { # mode n run
	local mode=$1 n=$2 run=$3 fan=1 k rp="" go="$dir/go.$mode.$n.$run" t0
	case $mode in tree) fan=2 ;; direct) fan=0 ;; esac
	rm -f "$dir"/r.* "$dir"/done.*
	for k in $(seq 1 "$n"); do
		local ns="zrr${tag}_$k" a="$net.$((10 + k))"
		if [ "$mode" = rank0 ]; then
			ip netns exec "$ns" "$PY" "$root/bench/readers.py" recv "$a" 7700 "$bytes" "$dir/r.$k" \
				"$dir/done.$k" >"$dir/reader$k.log" 2>&1 &
		else
			# one at a time: the relay tree is in the order they register
			ip netns exec "$ns" "$PY" "$root/bench/readers.py" reader "$addr" m 1 "$fan" "$a:0" \
				"$dir/r.$k" "$go" "$dir/done.$k" >"$dir/reader$k.log" 2>&1 &
		fi
		rp="$rp $!"
		wait_file "$dir/r.$k" 60 || fail "reader $k did not start"
	done
	if [ "$mode" = rank0 ]; then
		local peers=""
		for k in $(seq 1 "$n"); do peers="$peers $net.$((10 + k)):7700"; done
		# rank 0 behind a link of its own like every reader
		ip netns exec "zrr${tag}_0" "$PY" "$root/bench/readers.py" send0 "$addr" m 1 "$dir/r.0" "$go" "$dir/done.0" \
			$peers >"$dir/rank0.log" 2>&1 &
		rp="$rp $!"
		wait_file "$dir/r.0" 60 || fail "rank 0 did not start"
	fi
	t0=$(date +%s.%N)
	: >"$go"
	for k in $(seq 1 "$n"); do wait_file "$dir/done.$k" 600 || fail "reader $k did not finish"; done
	: >"$go.quit"
	for p in $rp; do wait "$p" 2>/dev/null; done
	"$PY" - "$dir" "$n" "$t0" <<'EOF'
import json, sys
d, n, t0 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
v = [json.load(open("%s/done.%d" % (d, k))) for k in range(1, n + 1)]
print("%.3f %d" % (max(x["t1"] for x in v) - t0,
                   sum(x.get("stats", {}).get("bytes_from_servers", 0) for x in v)))
EOF
}
median() { sort -g | awk '{ v[n++] = $1 } END { print v[int(n / 2)] }'; }
[ "$(date +%N)" != "%N" ] || skip "date has no %N"

rate_bps=$("$PY" -c 'import sys; s = sys.argv[1].lower(); m = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
print(next(float(s[:-len(k)]) * v for k, v in m.items() if s.endswith(k)))' "$RATE")
echo "| readers | bound s | pipeline (relayed, fanout 1) s | / bound | tree (fanout 2) s | / bound | direct s | / bound | rank 0 sends to each s | / bound | servers' bytes, pipeline / direct |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
: >"$out/readers.dat"
for n in $COUNTS; do
	declare -A t=() sb=()
	for mode in ${MODES:-pipe tree direct rank0}; do
		: >"$dir/times"
		for run in $(seq 1 "$RUNS"); do
			deliver "$mode" "$n" "$run" >>"$dir/times" || fail "$mode to $n readers"
		done
		t[$mode]=$(awk '{ print $1 }' "$dir/times" | median)
		sb[$mode]=$(awk '{ print $2 }' "$dir/times" | median)
	done
	# the bound: the model over the servers' link, then each relay's
	# forwarding of the last tensor (n - 1 hops of a pipeline)
	bound=$(awk -v b="$bytes" -v r="$rate_bps" -v n="$n" -v k="$TENSORS" 'BEGIN {
		printf "%.3f", b * 8 / r + (n - 1) * (b / k) * 8 / r }')
	awk -v n="$n" -v bd="$bound" -v p="${t[pipe]}" -v tr="${t[tree]}" -v d="${t[direct]}" \
		-v z="${t[rank0]}" -v sp="${sb[pipe]}" -v sd="${sb[direct]}" 'BEGIN {
		printf "| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f MB / %.1f MB |\n",
			n, bd, p, p / bd, tr, tr / bd, d, d / bd, z, z / bd, sp / 1e6, sd / 1e6 }'
	echo "$n $bound ${t[pipe]} ${t[tree]} ${t[direct]} ${t[rank0]} ${sb[pipe]} ${sb[direct]}" >>"$out/readers.dat"
	unset t sb
done
echo
echo "(a model of $TENSORS tensors of $NUMEL f32 elements, $((bytes / 1000000)) MB; every namespace - the coordinator and 2 servers in one, each reader and rank 0 in its own - on a bridge through a veth pair shaped by tbf at $RATE in both directions, its queue $QUEUE deep; medians of $RUNS deliveries, from the go to the last reader's last byte; readers started one after another, the relay tree in that order. Servers' bytes: what the readers read from the servers, summed.)"

# ---- the trainers' step with a reader pulling every version: the
# servers' link and the reader's at $TRAIN_RATE (the step's compute, not
# the link, is what a reader could slow)
TRAIN_RATE=${TRAIN_RATE:-4gbit}
for v in "zv0$tag" "zv1$tag"; do
	tc qdisc replace dev "$v" root tbf rate "$TRAIN_RATE" burst 1mb latency "$QUEUE" || fail "tc"
done
inns zrs$tag tc qdisc replace dev "zw0$tag" root tbf rate "$TRAIN_RATE" burst 1mb latency "$QUEUE" || fail "tc"
inns "zrr${tag}_1" tc qdisc replace dev "zw1$tag" root tbf rate "$TRAIN_RATE" burst 1mb latency "$QUEUE" || fail "tc"
TRAIN_PARAMS=$("$bin/charlm" --print-spec --depth "$DEPTH" --hidden "$HIDDEN" | "$PY" -c 'import json, math, sys
print(sum(math.prod(t["shape"]) for u in json.load(sys.stdin)["units"] for t in u["tensors"]))') ||
	fail "cannot size the example"
train() { # job follow
	local job=$1 f=$2 ranks="" fp=""
	"$bin/charlm" --print-spec --job "$job" --world 2 --stage 3 --depth "$DEPTH" --hidden "$HIDDEN" \
		>"$dir/$job.json"
	"$PY" -c 'import json, sys
s = json.load(open(sys.argv[1])); s["readers"] = {"pins": 2}
json.dump(s, open(sys.argv[1], "w"))' "$dir/$job.json" || fail "cannot set readers"
	ctl job create "$dir/$job.json" >/dev/null || fail "cannot create $job"
	rm -f "$dir/stop.$job"
	if [ "$f" != 0 ]; then
		# f 2: the reader at nice 19, its CPU as on a machine of its
		# own (what an inference worker's host is): what the servers'
		# serving costs the step, not the reader's own work on the two
		# cores the trainers use; f 3: so, in the servers' namespace,
		# where it takes their copies from their arenas over shm (as
		# rdma's one-sided reads do across hosts: the servers send
		# nothing); f 4: there at the trainers' priority
		ip netns exec "$([ "$f" -ge 3 ] && echo "zrs$tag" || echo "zrr${tag}_1")" \
			nice -n $((f == 2 || f == 3 ? 19 : 0)) \
			"$PY" "$root/bench/readers.py" follow "$addr" "$job" \
			"$dir/stop.$job" "$dir/follow.$job" "$dir/fready.$job" >"$dir/follow.$job.log" 2>&1 &
		fp=$!
		wait_file "$dir/fready.$job" 60 || fail "the reader of $job did not start"
	fi
	for r in 1 0; do
		"$bin/charlm" --coordinator "$addr" --job "$job" --rank $r --steps "$STEPS" --batch "$BATCH" \
			--depth "$DEPTH" --hidden "$HIDDEN" --transport tcp --print-every 0 \
			--step-log "$dir/$job.$r" >"$dir/$job.out$r" 2>&1 &
		ranks="$ranks $!"
	done
	for r in $ranks; do wait "$r" || fail "$job did not train"; done
	: >"$dir/stop.$job"
	if [ -n "$fp" ]; then
		wait "$fp" || fail "the reader of $job failed"
		"$PY" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["versions"]), file=sys.stderr)' \
			"$dir/follow.$job" 2>>"$dir/versions.$f"
		[ "$f" -lt 3 ] || "$PY" -c 'import json, sys
s = json.load(open(sys.argv[1]))["stats"]
sys.exit(s["bytes_from_servers_one_sided"] != s["bytes_from_servers"])' "$dir/follow.$job" ||
			fail "the reader in the servers' namespace did not take every byte from their arenas"
	fi
	ctl job delete "$job" >/dev/null
	awk -v w="$WARM" '$1 >= w { print $4 }' "$dir/$job.0" "$dir/$job.1" | median
}
echo
echo "| trainers' step | batch per rank | no reader ms | a reader pulling every version ms | with / without | the reader at nice 19 ms | with / without | one-sided (shm) ms | with / without | one-sided at nice 19 ms | with / without | versions read whole per run (each reader) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for BATCH in $TRAIN_BATCHES; do
	: >"$dir/versions.1"
	: >"$dir/versions.2"
	: >"$dir/versions.3"
	: >"$dir/versions.4"
	plain="" with="" niced="" onesided="" direct=""
	for k in $(seq 1 "$TRAIN_RUNS"); do
		plain="$plain $(train "p$BATCH-$k" 0)"
		with="$with $(train "w$BATCH-$k" 1)"
		niced="$niced $(train "n$BATCH-$k" 2)"
		direct="$direct $(train "d$BATCH-$k" 4)"
		onesided="$onesided $(train "o$BATCH-$k" 3)"
	done
	mp=$(echo "$plain" | tr ' ' '\n' | grep . | median)
	mw=$(echo "$with" | tr ' ' '\n' | grep . | median)
	mn=$(echo "$niced" | tr ' ' '\n' | grep . | median)
	mo=$(echo "$onesided" | tr ' ' '\n' | grep . | median)
	md=$(echo "$direct" | tr ' ' '\n' | grep . | median)
	nv="$(median <"$dir/versions.1") / $(median <"$dir/versions.2") / $(median <"$dir/versions.4") / $(median <"$dir/versions.3")"
	awk -v a="$mp" -v b="$mw" -v c="$mn" -v e="$md" -v d="$mo" -v v="$nv" -v bt="$BATCH" -v st="$STEPS" 'BEGIN {
		printf "| charlm, 2 ranks, ZeRO-3 | %d | %.1f | %.1f | %.3f | %.1f | %.3f | %.1f | %.3f | %.1f | %.3f | %s of %d |\n", bt, a * 1e3, b * 1e3, b / a, c * 1e3, c / a, e * 1e3, e / a, d * 1e3, d / a, v, st + 1 }'
done
echo
echo "(charlm --depth $DEPTH --hidden $HIDDEN ($((TRAIN_PARAMS * 4 / 1000000)) MB a version), $STEPS steps, medians of both ranks' steps from $WARM on and of $TRAIN_RUNS runs in turns; the trainers on the bridge's side, the servers and the reader each behind a link shaped at $TRAIN_RATE)"
