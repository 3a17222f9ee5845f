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
GP
echo "plots: $out/ckpt.png $out/transport.png"
