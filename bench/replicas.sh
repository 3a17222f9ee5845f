#!/usr/bin/env bash
# replicas.sh ADDR - what replicated shards cost a training step: the same
# job (examples/charlm.c at --depth $DEPTH --hidden $HIDDEN, 2 trainers,
# f32, AdamW, ZeRO-3, prefetch 1, push depth $PUSH_DEPTH: a replicated job's
# push completes once its step is on every copy, so a second push in
# flight keeps the backward pass from waiting on each; both runs use it)
# through the cluster at ADDR (two or more
# servers) with one copy of each shard and with two ("replicas": 2), the
# two runs alternated $REPS times so that the machine's drift falls on
# both. Per round: each run's median step time over both ranks' steps
# $WARM.. ; the ratio K=2 / K=1 of the same round; the bytes the servers
# forwarded to replicas per step (their replica_bytes counters, against
# 4 bytes per parameter, the reduced fp32 gradient).
set -euo pipefail
addr=$1
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
DEPTH=${DEPTH:-6} HIDDEN=${HIDDEN:-512} BATCH=${BATCH:-64} STEPS=${STEPS:-25} WARM=${WARM:-5}
REPS=${REPS:-3} PUSH_DEPTH=${PUSH_DEPTH:-2}
tmp=$(mktemp -d /tmp/zshard-replicas-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ctl() { "$bin/zshardctl" --coordinator "$addr" "$@"; }
med() { awk -v c="$1" -v w="$WARM" '$1 >= w { v[n++] = $c } END {
	for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
	print n ? v[int(n / 2)] : "nan" }' "${@:2}"; }
median() { sort -g | awk '{ v[n++] = $1 } END { print n ? v[int(n / 2)] : "nan" }'; }
forwarded() { ctl stats --json | awk -F': ' '/"replica_bytes"/ { s += $2 } END { print s + 0 }'; }

# run JOB K TRANSPORT: two ranks; prints the median step time (s) and the
# bytes forwarded per step
run() {
	local job=$1 k=$2 tr=$3 before after
	"$bin/charlm" --print-spec --job "$job" --world 2 --stage 3 --depth "$DEPTH" --hidden "$HIDDEN" |
		python3 -c 'import json, sys; s = json.load(sys.stdin); s["replicas"] = int(sys.argv[1]); json.dump(s, sys.stdout)' "$k" \
		>"$tmp/$job.json"
	ctl job create "$tmp/$job.json" >/dev/null
	before=$(forwarded)
	for r in 1 0; do
		"$bin/charlm" --coordinator "$addr" --job "$job" --rank $r --steps "$STEPS" --batch "$BATCH" \
			--depth "$DEPTH" --hidden "$HIDDEN" --prefetch 1 --push-depth "$PUSH_DEPTH" --transport "$tr" \
			--print-every 0 --step-log "$tmp/$job.$r" >"$tmp/$job.out$r" 2>&1 &
	done
	wait || { cat "$tmp/$job".out*; exit 1; }
	after=$(forwarded)
	ctl job delete "$job" >/dev/null
	echo "$(med 4 "$tmp/$job.0" "$tmp/$job.1") $(( (after - before) / STEPS ))"
}

params=$("$bin/charlm" --print-spec --depth "$DEPTH" --hidden "$HIDDEN" | awk -F'[][]' '/shape/ { n = split($0, a, /"shape": \[/); for (i = 2; i <= n; i++) { split(a[i], d, /\]/); k = split(d[1], x, /, */); p = 1; for (j = 1; j <= k; j++) p *= x[j]; s += p } } END { print s }')

echo "| transport | step ms, 1 copy | step ms, 2 copies | 2 copies / 1 (median of rounds; goal <= 1.15) | MiB forwarded per step | expected (4 B x parameters) |"
echo "|---|---|---|---|---|---|"
for tr in tcp shm; do
	: >"$tmp/one" ; : >"$tmp/two"; : >"$tmp/ratio"; fwd=0
	for i in $(seq 1 "$REPS"); do
		read -r a _ < <(run "rp1-$tr-$i" 1 "$tr")
		read -r b fwd < <(run "rp2-$tr-$i" 2 "$tr")
		echo "$a" >>"$tmp/one"
		echo "$b" >>"$tmp/two"
		awk -v a="$a" -v b="$b" 'BEGIN { print b / a }' >>"$tmp/ratio"
	done
	awk -v tr="$tr" -v a="$(median <"$tmp/one")" -v b="$(median <"$tmp/two")" \
		-v r="$(median <"$tmp/ratio")" -v f="$fwd" -v p="$params" 'BEGIN {
		printf "| %s | %.2f | %.2f | %.3f | %.2f | %.2f |\n", tr, a * 1e3, b * 1e3, r, f / 1048576, p * 4 / 1048576 }'
done
echo
echo "(charlm --depth $DEPTH --hidden $HIDDEN: $params parameters; 2 trainers, ZeRO-3, prefetch 1, push depth $PUSH_DEPTH, batch $BATCH, $STEPS steps, medians over both ranks' steps $WARM..$((STEPS - 1)); $REPS rounds, each a run with 1 copy then one with 2; forwarded: the servers' replica_bytes over the run / steps, the initial upload's forward (4 B x parameters once) included.)"
