#!/usr/bin/env bash
# run.sh - the benchmark suite (make bench). Starts its own local cluster,
# writes markdown tables under build/bench/, prints them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/bench
mkdir -p "$out"
# gnuplot draws the plots; install it the way the build installs its packages
if ! command -v gnuplot >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 gnuplot-nox >/dev/null ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 gnuplot-nox >/dev/null; }
	else
		echo "bench: no gnuplot; as root: apt-get install gnuplot-nox (the tables are written without plots)" >&2
	fi
fi
dir=$(mktemp -d /tmp/zshard-bench-XXXXXX)
launcher=$root/deploy/local/zshard-local
trap '"$launcher" stop --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

addr=$("$launcher" start --servers 3 --dir "$dir" 2>/dev/null)
"$root/build/bin/zshardctl" --coordinator "$addr" job create "$root/examples/charlm.json" >/dev/null
{
	echo "## Control plane: coordinator RPC latency on loopback ($(date -u +%F), $(nproc) cores)"
	echo
	"$root/build/bin/coord_rpc" "$addr" charlm 1
} | tee "$out/coord_rpc.md"

{
	echo
	echo "## Data plane: transport throughput ($(date -u +%F), $(nproc) cores; in-process servers, no optimizer)"
	echo
	"$root/build/bin/bench_transport" 7
} | tee "$out/transport.md"

{
	echo
	echo "## Optimizer kernel: AdamW against the fp32 triad bound ($(date -u +%F), $(nproc) cores)"
	echo
	"$root/build/bin/bench_optim" $((32 << 20)) 5
} | tee "$out/optim.md"

{
	echo
	echo "## Checkpoints: write and restore against the disk ($(date -u +%F), $(nproc) cores)"
	echo
	"$root/build/bin/bench_ckpt" "$root/build/bench" 256 5
} | tee "$out/ckpt.md"

{
	echo
	echo "## NVMe tier: step time against state in memory ($(date -u +%F), $(nproc) cores)"
	echo
	"$root/build/bin/bench_tier" "$root/build/bench" 16 5
} | tee "$out/tier.md"

if command -v gnuplot >/dev/null 2>&1; then
	"$root/bench/plot.sh" "$out"
fi
