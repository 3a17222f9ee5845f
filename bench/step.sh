#!/usr/bin/env bash
# step.sh ADDR OUT_DIR - the full training step of the example model
# (examples/charlm.c at --depth $DEPTH --hidden $HIDDEN, 2 trainers, f32,
# AdamW) through the
# cluster at ADDR, for every ZeRO stage, prefetch depth 0, 1 and 2, two unit
# granularities (1 and 2 layers per unit) and both
# transports. Per configuration: the median over both ranks' steps after
# $WARM warm-up steps ($STEPS in all) of the step time and its split (from
# libzshard's step report), bytes moved per step, the peak live parameter
# and gradient bytes beside `zshardctl plan`'s prediction, the trainer's
# peak resident memory and the servers' update time. Also the step's
# compute alone (charlm --local, both ranks at once as in the step) and its
# communication alone (the step driver without the model) for the overlap
# ratio.
# Writes OUT_DIR/step.md (markdown) and OUT_DIR/step.dat (for plot.sh).
set -euo pipefail
addr=$1 out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
DEPTH=${DEPTH:-6} HIDDEN=${HIDDEN:-512} BATCH=${BATCH:-64} STEPS=${STEPS:-25} WARM=${WARM:-5}
tmp=$(mktemp -d /tmp/zshard-step-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ctl() { "$bin/zshardctl" --coordinator "$addr" "$@"; }

# median, min and max of column $2 (1-based) of the step logs, steps >= WARM
stat() { awk -v c="$1" -v w="$WARM" '$1 >= w { v[n++] = $c } END {
	if (!n) { print "nan nan nan"; exit }
	for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
	print v[int(n / 2)], v[0], v[n - 1] }' "${@:2}"; }
med() { stat "$@" | cut -d' ' -f1; }
peak() { awk -v c="$1" 'BEGIN { m = 0 } $c > m { m = $c } END { print m }' "${@:2}"; }

# run JOB LPU STAGE PREFETCH TRANSPORT [--no-compute]: two ranks, step logs in $tmp/JOB.R
run() {
	local job=$1 lpu=$2 stage=$3 pf=$4 tr=$5 extra=${6:-}
	"$bin/charlm" --print-spec --job "$job" --world 2 --stage "$stage" --depth "$DEPTH" --hidden "$HIDDEN" \
		--layers-per-unit "$lpu" >"$tmp/$job.json"
	ctl job create "$tmp/$job.json" >/dev/null
	for r in 1 0; do
		"$bin/charlm" --coordinator "$addr" --job "$job" --rank $r --steps "$STEPS" --batch "$BATCH" \
			--depth "$DEPTH" --hidden "$HIDDEN" --layers-per-unit "$lpu" --prefetch "$pf" --transport "$tr" \
			--print-every 0 --step-log "$tmp/$job.$r" $extra >"$tmp/$job.out$r" 2>&1 &
	done
	wait || { cat "$tmp/$job".out*; exit 1; }
}

params=$("$bin/charlm" --print-spec --depth "$DEPTH" --hidden "$HIDDEN" | awk -F'[][]' '/shape/ { n = split($0, a, /"shape": \[/); for (i = 2; i <= n; i++) { split(a[i], d, /\]/); k = split(d[1], x, /, */); p = 1; for (j = 1; j <= k; j++) p *= x[j]; s += p } } END { print s }')

echo "| transport | units | stage | prefetch | step ms (median, min-max) | compute | gather wait | push wait | control | server update ms | MiB gathered / pushed per step | peak params + grads | plan predicts | measured / plan | trainer peak RSS |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
: >"$out/step.dat"
for tr in tcp shm; do
	for lpu in 1 2; do
		units=$(( (DEPTH + 3 + lpu - 1) / lpu ))
		for stage in 1 2 3; do
			for pf in 0 1 2; do
				job=st-$tr-$lpu-$stage-$pf
				run "$job" "$lpu" "$stage" "$pf" "$tr"
				logs=("$tmp/$job.0" "$tmp/$job.1")
				read -r s slo shi < <(stat 4 "${logs[@]}")
				c=$(med 5 "${logs[@]}")
				gw=$(med 6 "${logs[@]}")
				pw=$(med 7 "${logs[@]}")
				cl=$(med 8 "${logs[@]}")
				bg=$(med 9 "${logs[@]}")
				bp=$(med 10 "${logs[@]}")
				pk=$(awk 'BEGIN { m = 0 } { if ($11 + $12 > m) m = $11 + $12 } END { print m }' "${logs[@]}")
				rss=$(peak 13 "${logs[@]}")
				plan=$(ctl plan --job "$job" --prefetch "$pf" --json | awk -F': ' '/"total_bytes"/ { print $2 + 0; exit }')
				upd=$(ctl stats "$job" --json | awk -F': ' '/"reduce_seconds"|"optim_seconds"/ { t[n % 2] += $2; n++ } /"optim_seconds"/ { if (t[0] + t[1] > m) m = t[0] + t[1]; t[0] = t[1] = 0 } END { printf "%.2f", m * 1e3 }')
				ctl job delete "$job" >/dev/null
				awk -v tr="$tr" -v u="$units" -v st="$stage" -v pf="$pf" -v s="$s" -v slo="$slo" -v shi="$shi" \
					-v c="$c" -v gw="$gw" -v pw="$pw" -v cl="$cl" -v upd="$upd" -v bg="$bg" -v bp="$bp" \
					-v pk="$pk" -v plan="$plan" -v rss="$rss" 'BEGIN {
					printf "| %s | %d | %d | %d | %.2f (%.2f-%.2f) | %.2f | %.2f | %.2f | %.2f | %s | %.2f / %.2f | %.2f MiB | %.2f MiB | %.2f | %.1f MiB |\n",
						tr, u, st, pf, s * 1e3, slo * 1e3, shi * 1e3, c * 1e3, gw * 1e3, pw * 1e3, cl * 1e3, upd,
						bg / 1048576, bp / 1048576, pk / 1048576, plan / 1048576, plan ? pk / plan : 0, rss / 1048576 }'
				echo "$tr $units $stage $pf $s $c $gw $pw $cl $pk $plan" >>"$out/step.dat"
			done
		done
	done
done

# the overlap: ZeRO-3, prefetch 1, against compute alone and communication alone
echo
echo "| transport | units | step ms (ZeRO-3, prefetch 1) | compute alone ms | communication alone ms | step / max(compute, communication) |"
echo "|---|---|---|---|---|---|"
: >"$out/overlap.dat"
# compute alone is the model's, whatever the transport and units: once
for r in 0 1; do
	"$bin/charlm" --local --steps "$STEPS" --batch "$BATCH" --depth "$DEPTH" --hidden "$HIDDEN" \
		--step-log "$tmp/local.$r" >/dev/null &
done
wait
comp=$(med 2 "$tmp/local.0" "$tmp/local.1")
for tr in tcp shm; do
	for lpu in 1 2; do
		units=$(( (DEPTH + 3 + lpu - 1) / lpu ))
		run "ov-$tr-$lpu" "$lpu" 3 1 "$tr" --no-compute
		comm=$(med 4 "$tmp/ov-$tr-$lpu.0" "$tmp/ov-$tr-$lpu.1")
		ctl job delete "ov-$tr-$lpu" >/dev/null
		step=$(awk -v tr="$tr" -v u="$units" '$1 == tr && $2 == u && $3 == 3 && $4 == 1 { print $5 }' "$out/step.dat")
		awk -v tr="$tr" -v u="$units" -v s="$step" -v c="$comp" -v m="$comm" 'BEGIN {
			mx = c > m ? c : m; printf "| %s | %d | %.2f | %.2f | %.2f | %.2f |\n", tr, u, s * 1e3, c * 1e3, m * 1e3, s / mx }'
		echo "$tr $units $step $comp $comm" >>"$out/overlap.dat"
	done
done
echo
echo "(charlm --depth $DEPTH --hidden $HIDDEN: $params parameters, $((params * 4 / 1024)) KiB f32; batch $BATCH per rank; 2 trainers, $STEPS steps, medians over both ranks' steps $WARM..$((STEPS - 1)); peak = the largest live parameter + gradient bytes of any step; the plan is \`zshardctl plan --job\` for the same job and prefetch; server update = reduce + optimizer of the last step, the slowest server; compute alone: both ranks' forward and backward at once, without the service; communication alone: the same step driver without the model.)"
