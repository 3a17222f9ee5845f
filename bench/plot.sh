#!/usr/bin/env bash
# plot.sh OUT_DIR - PNG plots of the benchmark tables make bench wrote there
# (gnuplot from Debian). Reads the markdown tables back, so the plots show
# exactly the figures the tables report.
set -euo pipefail
out=$1

# checkpoints: GB/s of each way against its plain-file baseline
awk -F'|' '/sequential write|checkpoint write|sequential read|restore read/ {
	gsub(/^ +| +$/, "", $2); gsub(/LMDB |, commit| \(the server.s\)| \(page cache warm\)| \+ CRC check/, "", $2);
	gsub(/ /, "_", $2); print $2, $3 }' "$out/ckpt.md" >"$out/ckpt.dat"
# transport: GB/s at 64 MiB, 1 server x 1 trainer, against the baselines
awk -F'|' 'NR > 1 && $4 ~ /64 MiB/ && $5 ~ / 1 / && $6 ~ / 1 / {
	gsub(/ /, "", $2); gsub(/ /, "", $3); print $2 "_" $3, $7 }' "$out/transport.md" >"$out/transport.dat"

# the training step: its split per configuration, and peak memory beside the plan
awk '{ printf "%s-%du-z%d-p%d %.3f %.3f %.3f %.3f %.3f %.3f\n", $1, $2, $3, $4, $6 * 1e3, $7 * 1e3, $8 * 1e3, $9 * 1e3, $10 / 1048576, $11 / 1048576 }' \
	"$out/step.dat" >"$out/step_split.dat"
# collectives: zshard against MPI, GB/s (the ratio table)
awk -F'|' '/ vs (tcp|vader),self / { gsub(/ /, "", $4); c = $3; sub(/.*\(/, "", c); sub(/\).*/, "", c)
	print substr($2, 2, 3) "-" c "-" $4, $5 + 0, $6 + 0 }' "$out/coll.md" >"$out/coll.dat"
# the optimizer: G params/s of zshard, the triad bound, the peers' best,
# AdamW's traffic at memory speed
awk -F'|' '/^\| fp32 triad bound / { b[$3 + 0] = $4 + 0 }
	/^\| AdamW traffic / { f[$3 + 0] = $4 + 0 }
	/^\| zshard AdamW / { z[$3 + 0] = $4 + 0 }
	/^\| (torch|DeepSpeed)/ { t = $3 + 0; if ($4 + 0 > best[t]) best[t] = $4 + 0 }
	END { for (t = 1; t <= 2; t++) print t "-thread" (t > 1 ? "s" : ""), z[t] + 0, b[t] + 0, best[t] + 0, f[t] + 0 }' "$out/optim.md" >"$out/optim.dat"

# the GPT against FSDP2, DDP and DeepSpeed (when the peers ran)
peers_plot=""
[ -s "$out/peers.dat" ] && peers_plot='set terminal pngcairo size 1400,560 font ",9"
set output "'"$out"'/peers.png"
set title "The GPT example, 2 ranks: zshard against PyTorch FSDP2, DDP and DeepSpeed (median ms per step, lower is better)"
set style histogram clustered
set xtics rotate by -35
set rmargin 14
set ylabel "ms per step"
plot "'"$out"'/peers.dat" using 2:xtic(1) title ""'

gnuplot <<GP
set terminal pngcairo size 1000,480 font ",9"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.7
set grid ytics
set xtics rotate by -20 noenhanced
set ylabel "GB/s"
set yrange [0:*]

set output "$out/ckpt.png"
set title "Checkpoint write and restore against the same disk (zshard bench)"
plot "$out/ckpt.dat" using 2:xtic(1) title ""

set output "$out/transport.png"
set title "Gather and push of 64 MiB, 1 server x 1 trainer (zshard bench)"
plot "$out/transport.dat" using 2:xtic(1) title ""

set output "$out/coll.png"
set title "zshard against OpenMPI (2 ranks; tcp vs the TCP BTL, shm vs vader)"
set key top left
plot "$out/coll.dat" using 2:xtic(1) title "zshard", "" using 3 title "OpenMPI"

set output "$out/optim.png"
set title "AdamW: zshard's kernel, the triad bound, the best of torch fused and DeepSpeedCPUAdam, AdamW's traffic at memory speed"
set ylabel "G parameters / s"
plot "$out/optim.dat" using 2:xtic(1) title "zshard", "" using 3 title "triad bound (triad / 28 B)", "" using 4 title "best peer", "" using 5 title "AdamW traffic at memory speed"

set terminal pngcairo size 1400,520 font ",8"
set output "$out/step.png"
set title "Training step split per configuration (transport-units-stage-prefetch), medians"
set style histogram rowstacked
set ylabel "ms"
set xtics rotate by -60
plot "$out/step_split.dat" using 2:xtic(1) title "compute", "" using 3 title "gather wait", "" using 4 title "push wait", "" using 5 title "control"

set output "$out/memory.png"
set title "Trainer peak (parameters + gradients) against zshardctl plan's prediction"
set style histogram clustered
set ylabel "MiB"
plot "$out/step_split.dat" using 6:xtic(1) title "measured peak", "" using 7 title "plan"
$peers_plot
GP
echo "plots: $out/ckpt.png $out/transport.png $out/coll.png $out/optim.png $out/step.png $out/memory.png $out/peers.png"
