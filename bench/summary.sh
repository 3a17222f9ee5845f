#!/usr/bin/env bash
# summary.sh OUT_DIR - every target of the benchmark suite (issue 5) as the
# ratio this run measured, read back from the tables run.sh wrote there.
set -euo pipefail
out=$1
echo
echo "## Summary: the targets, as ratios measured in this run"
echo
echo "| target | measured | goal | met |"
echo "|---|---|---|---|"
# the overlap: step / max(compute alone, communication alone), ZeRO-3, prefetch 1
awk '{ mx = $4 > $5 ? $4 : $5; r = $3 / mx
	printf "| ZeRO-3 step, %s, %d units, prefetch 1: step / max(compute alone, communication alone) | %.2f (%.1f ms against %.1f / %.1f ms; %.2f of their sum) | <= 1.15 | %s |\n",
		$1, $2, r, $3 * 1e3, $4 * 1e3, $5 * 1e3, $3 / ($4 + $5), (r <= 1.15) ? "yes" : "no" }' "$out/overlap.dat"
# the same where a shaped link bounds the communication (bench/link.sh)
[ -s "$out/link.dat" ] && awk '{ mx = $4 > $5 ? $4 : $5; r = $7 / mx
	printf "| ZeRO-3 step, tcp through a veth shaped at %s (raw TCP %s MB/s), prefetch 1: step / max(compute alone, communication alone) | %.2f (%.1f ms against %.1f / %.1f ms) | <= 1.10 | %s |\n",
		$1, $2, r, $7 * 1e3, $4 * 1e3, $5 * 1e3, (r <= 1.10) ? "yes" : "no" }' "$out/link.dat"
# replicated shards: the step with 2 copies against 1 (bench/replicas.sh)
awk -F'|' '/^\| (tcp|shm) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|/ { tr = $2; gsub(/^ +| +$/, "", tr)
	printf "| ZeRO-3 step with replicas 2 against 1, %s | %.3f (%.1f against %.1f ms; %.1f MiB forwarded per step) | %s | %s |\n",
		tr, $5 + 0, $4 + 0, $3 + 0, $6 + 0, tr == "tcp" ? "<= 1.15" : "(reported)",
		tr != "tcp" ? "-" : ($5 + 0 <= 1.15) ? "yes" : "no" }' "$out/replicas.md" 2>/dev/null || true
# a lost server with replicas against the rollback path (bench/recovery.py)
awk -F'|' '/^\| server \|/ { rb = $6 + 0; rs = $5 + 0 } /^\| replicated \|/ { fs = $6 + 0; fa = $5 + 0; ok = 1 }
	END { if (ok) printf "| a shard server killed, replicas 2 against none: from the kill to 3 steps past it, steps computed again | %.1f s against %.1f s; %d against %d steps | no step computed again | %s |\n",
		fs, rb, fa, rs, (fa == 0) ? "yes" : "no" }' "$out/recovery.md" 2>/dev/null || true
# the coordinator at scale (bench_coord_scale)
awk -F'|' '/^\| placement of / { printf "| %s | %.3f ms | < 50 ms | %s |\n", $2, $5 + 0, ($5 + 0 < 50) ? "yes" : "no" }
	/^\| (Heartbeat|TrainerHeartbeat|ReportStep)/ { n = $2; gsub(/^ +| +$/, "", n)
		printf "| coordinator at 1,000 servers and 10,000 ranks: %s | %.3f ms median, %.3f ms p99 (%s calls/s) | < 1 ms, < 10 ms | %s |\n",
			n, $5 + 0, $6 + 0, $4 + 0, ($5 + 0 < 1 && $6 + 0 < 10) ? "yes" : "no" }' "$out/coord_scale.md" 2>/dev/null || true
# collectives against MPI
awk -F'|' '/ vs (tcp|vader),self / {
	gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $4)
	goal = ($2 ~ /^tcp/ && $3 ~ /reduce-scatter/) ? 2 : 1
	if ($3 ~ /allreduce/) next
	printf "| zshard %s, %s %s, against MPI %s | %.2f (%.2f against %.2f GB/s) | >= %d | %s |\n",
		substr($2, 1, 3), $3, $4, substr($2, 8), $7 + 0, $5 + 0, $6 + 0, goal, ($7 + 0 >= goal) ? "yes" : "no" }' "$out/coll.md"
# the optimizer, against today's peers and the memory bounds
awk -F'|' '/^\| [12] \| [0-9.]+ \| (torch|DeepSpeed)/ {
	peer = $4; gsub(/^ +| +$/, "", peer)
	printf "| AdamW kernel, %d thread(s), against the best of torch fused / DeepSpeedCPUAdam (%s) | %.2f (%.3f against %.3f G params/s) | >= 1.00 | %s |\n",
		$2 + 0, peer, $6 + 0, $3 + 0, $5 + 0, ($6 + 0 >= 1.0) ? "yes" : "no"
	printf "| AdamW kernel, %d thread(s), against the STREAM triad bound (triad / 28 B) | %.2f | >= 0.80 | %s |\n",
		$2 + 0, $7 + 0, ($7 + 0 >= 0.8) ? "yes" : "no"
	printf "| AdamW kernel, %d thread(s), against its own traffic at memory speed | %.2f | (the ceiling) | - |\n",
		$2 + 0, $8 + 0 }' "$out/optim.md"
# the reduction kernel against its traffic bound, beside the kernel it replaced
awk -F'|' '/^\| 2 \| [0-9.]+ \| [0-9.]+ \|/ {
	printf "| reduction (binned, order-independent), 2 threads, against its traffic bound (triad / 17 B per pushed byte) | %.2f (%.2f pushed GB/s; rank order %.2f, %.2f of its bound) | >= 0.50 | %s |\n",
		$7 + 0, $6 + 0, $4 + 0, $5 + 0, ($7 + 0 >= 0.5) ? "yes" : "no" }' "$out/reduce.md" 2>/dev/null || true
# the training step against the peers
awk -F'|' '/^\| zshard ZeRO-3 .* vs / { n = $2; gsub(/^ +| +$/, "", n)
	printf "| %s, step time | %.2f (%.1f against %.1f ms) | %s | %s |\n", n, $5 + 0, $4 + 0, $3 + 0,
		$6, ($5 + 0 <= ($6 ~ /0.80/ ? 0.8 : 1.0)) ? "yes" : "no" }' "$out/peers.md" 2>/dev/null || true
# the plan against the measured trainer peak at stage 3
# (prefetch 0: the plan is a bound the driver enforces; a blocking gather
# usually lets the previous push finish first, so fewer gradients are live)
for pf in "1 and 2" 0; do
	awk -v pf="$pf" '$3 == 3 && $11 > 0 && (pf == "0" ? $4 == 0 : $4 >= 1) {
		r = $10 / $11; if (!n || r < lo) lo = r; if (!n || r > hi) hi = r; n++ }
		END { if (n) printf "| ZeRO-3 trainer peak (parameters + gradients) against zshardctl plan, prefetch %s, %d configurations | %.2f-%.2f | within 0.90-1.10 | %s |\n",
			pf, n, lo, hi, (lo >= 0.9 && hi <= 1.1) ? "yes" : "no" }' "$out/step.dat"
done
# pushes from device memory against host staging (bench/devpush.c)
awk -F'|' '/^\| a step of one 64 MiB fp32 unit, device / { n = $2; gsub(/^ +| +$/, "", n)
	printf "| %s: step with pushes from device memory / through host staging | %.2f (%.1f against %.1f ms) | < 1.00 | %s |\n",
		n, $7 + 0, $6 + 0, $4 + 0, ($7 + 0 < 1.0) ? "yes" : "no" }' "$out/devpush.md" 2>/dev/null || true
