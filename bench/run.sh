#!/usr/bin/env bash
# run.sh - the benchmark suite (make bench). Installs what it compares with
# (as root: gnuplot, OpenMPI; torch and DeepSpeed from PyPI into
# build/torch-venv), starts its own local cluster,
# writes markdown tables and PNG plots under build/bench/, prints them, and
# ends with build/bench/summary.md: every target of the suite as a ratio
# measured in this run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/bench
bin=$root/build/bin
mkdir -p "$out"
REPS=${REPS:-7}
today="$(date -u +%F), $(nproc) cores"

# the peers and the plotter, from Debian, the way the build installs its packages
want=""
command -v gnuplot >/dev/null 2>&1 || want="$want gnuplot-nox"
command -v mpicc >/dev/null 2>&1 || want="$want openmpi-bin libopenmpi-dev"
if [ -n "$want" ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "bench: installing$want"
		export DEBIAN_FRONTEND=noninteractive
		# shellcheck disable=SC2086
		apt-get install -y -q -o DPkg::Lock::Timeout=300 $want >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null && apt-get install -y -q -o DPkg::Lock::Timeout=300 $want >/dev/null; } ||
			echo "bench: could not install$want; the comparisons that need them are skipped, each says so" >&2
	else
		echo "bench: not root, so not installing$want; the comparisons that need them are skipped, each says so" >&2
	fi
fi
# peers that allocate per call are crippled by fresh pages on these VMs
# (~0.33 GB/s to touch); glibc's huge-page malloc is their best setting
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1

dir=$(mktemp -d /tmp/zshard-bench-XXXXXX)
launcher=$root/deploy/local/zshard-local
trap '"$launcher" stop --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
addr=$("$launcher" start --servers 2 --capacity 8G --dir "$dir" 2>/dev/null)
ctl() { "$bin/zshardctl" --coordinator "$addr" "$@"; }

{
	echo "## Physical limits of this machine ($today)"
	echo
	"$bin/bench_limits" "$dir" "$REPS"
} | tee "$out/limits.md"

ctl job create "$root/examples/charlm.json" >/dev/null
{
	echo
	echo "## Control plane: coordinator RPC latency on loopback ($today)"
	echo
	"$bin/coord_rpc" "$addr" charlm 1
} | tee "$out/coord_rpc.md"
ctl job delete charlm >/dev/null

# ---- the coordinator at cluster scale: its own coordinator, 1,000 servers,
# 10,000 ranks, a job of 10,000 units, then the steady load
{
	echo
	echo "## Control plane at scale: 1,000 servers, 10,000 ranks, 10,000 units ($today)"
	echo
	"$bin/bench_coord_scale" "$bin" 1000 10000 10000 10 8
} | tee "$out/coord_scale.md"

{
	echo
	echo "## Data plane: transport throughput ($today; in-process servers, no optimizer)"
	echo
	"$bin/bench_transport" "$REPS"
} | tee "$out/transport.md"

# ---- collectives: zshard through real servers against OpenMPI, 2 ranks
{
	echo
	echo "## Collectives: zshard against OpenMPI, 2 ranks, fp32 ($today)"
	echo
	echo "| who | collective | total | GB/s (median of $REPS) | spread (min-max) |"
	echo "|---|---|---|---|---|"
	for tr in tcp shm; do
		for mib in 64 256; do
			job=coll-$tr-$mib
			printf '{"name": "%s", "stage": 3, "world_size": 2, "compute_dtype": "f32", "optimizer": {"kind": "sgd", "lr": 1e-9}, "units": [{"name": "g", "tensors": [{"name": "w", "shape": [%d]}]}]}\n' \
				"$job" $((mib * 262144)) >"$dir/$job.json"
			ctl job create "$dir/$job.json" >/dev/null
			"$bin/bench_coll" "$addr" "$job" "$tr" "$REPS"
			ctl job delete "$job" >/dev/null
		done
	done
	if command -v mpirun >/dev/null 2>&1; then
		make -s -C "$root" build/bin/bench_mpi_coll >/dev/null
		for btl in tcp,self vader,self; do
			mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
				--mca btl "$btl" -x GLIBC_TUNABLES "$bin/bench_mpi_coll" "$btl" "$REPS" 64 256
		done
	else
		echo
		echo "(OpenMPI is not installed: no MPI rows; as root: apt-get install openmpi-bin libopenmpi-dev)"
	fi
} | tee "$out/coll.md"
{
	echo
	echo "| transport vs MPI BTL | collective | total | zshard GB/s | MPI GB/s | zshard / MPI |"
	echo "|---|---|---|---|---|---|"
	awk -F'|' '
	/^\| zshard / { split($2, w, " "); k = w[2] "|" $3 "|" $4; z[k] = $5 + 0; order[n++] = k }
	/^\| MPI / { split($2, w, " "); t = w[2] ~ /^tcp/ ? "tcp" : "shm"; m[t "|" $3 "|" $4] = $5 + 0 }
	END { for (i = 0; i < n; i++) { k = order[i]; split(k, f, "|"); if (k in m)
		printf "| %s vs %s | %s | %s | %.2f | %.2f | %.2f |\n", f[1], f[1] == "tcp" ? "tcp,self" : "vader,self", f[2], f[3], z[k], m[k], z[k] / m[k] } }' "$out/coll.md"
	echo
	echo "(zshard: 2 trainers and 2 shard servers, 4 processes; push + reduce = push until acknowledged plus the extra time the next gather waits for the servers' reduction and update; MPI: --mca pml ob1, GLIBC_TUNABLES=glibc.malloc.hugetlb=1, buffers touched before timing. Bytes on the wire per rank differ: an MPI rank receives half the total in an allgather, a zshard trainer all of it.)"
} | tee -a "$out/coll.md"

# ---- the optimizer kernel against the triad bound and today's peers
venv=$root/build/torch-venv
sh "$root/tools/torch-venv.sh" "$venv" --peers ||
	echo "bench: could not install torch and DeepSpeed into $venv; the peers' rows are missing" >&2
{
	echo
	echo "## Optimizer kernel: AdamW against the memory bounds, torch.optim.AdamW and DeepSpeedCPUAdam ($today)"
	echo
	"$bin/bench_optim" $((64 << 20)) "$REPS"
	for th in 1 2; do
		echo
		if [ -x "$venv/bin/python" ]; then
			env -u LD_LIBRARY_PATH "$venv/bin/python" "$root/bench/adamw_peers.py" \
				"$root/build/lib/libzsbench.so" $((64 << 20)) 11 "$th" 2>/dev/null | grep -v '^\[' ||
				echo "(the peers' run failed)"
		else
			echo "(no torch: no peers)"
		fi
	done
} | tee "$out/optim.md"

# ---- the reduction kernel: the binned sum against the rank-order kernel it
# replaced and the triad bound, per pushed byte
{
	echo
	echo "## Reduction kernel: the order-independent binned sum against the rank-order kernel and the triad ($today)"
	echo
	"$bin/bench_reduce" $((16 << 20)) 16 "$REPS"
} | tee "$out/reduce.md"

{
	echo
	echo "## Checkpoints: write and restore against the disk ($today)"
	echo
	"$bin/bench_ckpt" "$dir" 256 5
} | tee "$out/ckpt.md"

{
	echo
	echo "## NVMe tier: step time against state in memory ($today)"
	echo
	"$bin/bench_tier" "$dir" 16 5
} | tee "$out/tier.md"

{
	echo
	echo "## The training step: every stage, prefetch depth and granularity, tcp and shm ($today)"
	echo
	"$root/bench/step.sh" "$addr" "$out"
} | tee "$out/step.md"

{
	echo
	echo "## Replicated shards: the step with 2 copies of each shard against 1 ($today)"
	echo
	"$root/bench/replicas.sh" "$addr"
} | tee "$out/replicas.md"

# ---- what a lost process costs: the rollback path (a server), a restart
# and a takeover on etcd (coordinators), etcd's own leader; clusters of
# their own, as the fault matrix runs them
{
	echo
	echo "## Recovery: what a lost process costs the same job ($today)"
	echo
	ZSHARD_BIN=$bin python3 "$root/bench/recovery.py" --trials 3 2>"$out/recovery.log" ||
		echo "(recovery.py failed: see $out/recovery.log)"
} | tee "$out/recovery.md"

# ---- scale by simulation: the time model checked against the harness at
# small scale, then a fleet's goodput at Llama 3's failure rate
{
	echo
	echo "## Scale by simulation: goodput at a fleet's failure rate ($today)"
	echo
	ZSHARD_BIN=$bin python3 "$root/bench/fleet.py" --trials 3 2>"$out/fleet.log" ||
		echo "(fleet.py failed: see $out/fleet.log)"
} | tee "$out/fleet.md"

# ---- overlap where a link, not these cores, bounds the communication
{
	echo
	echo "## Overlap on a shaped link: servers behind a veth pair at several tbf rates ($today)"
	echo
	"$root/bench/link.sh" "$out"; rc=$?
	[ $rc -eq 77 ] && echo "(skipped: the reason is above)"
	[ $rc -ne 0 ] && [ $rc -ne 77 ] && echo "(link.sh failed: rc $rc)"
	true
} | tee "$out/link.md"

# ---- weight readers where links bound the delivery
{
	echo
	echo "## Weight readers: one version to 1-16 readers behind shaped links ($today)"
	echo
	PYTHON="$venv/bin/python" "$root/bench/readers.sh" "$out"; rc=$?
	[ $rc -eq 77 ] && echo "(skipped: the reason is above)"
	[ $rc -ne 0 ] && [ $rc -ne 77 ] && echo "(readers.sh failed: rc $rc)"
	true
} | tee "$out/readers.md"

{
	echo
	echo "## The GPT example against PyTorch FSDP2, DDP and DeepSpeed ZeRO, 2 ranks ($today)"
	echo
	if [ -x "$venv/bin/python" ]; then
		env -u LD_LIBRARY_PATH ZSHARD_LIB="$root/build/lib/libzshard.so.0" \
			"$venv/bin/python" "$root/bench/peers.py" --runs "${PEER_RUNS:-3}" "$out/peers.dat" |
			grep -v '^| .* ms |$'
	else
		echo "(no torch: no peers)"
	fi
} | tee "$out/peers.md"

{
	echo
	echo "## GPUs: staging, device mode and the optimizer kernel ($today)"
	echo
	if [ -x "$bin/bench_gpu" ]; then
		printf '{"name": "gpustep", "stage": 3, "world_size": 1, "compute_dtype": "bf16",\n "optimizer": {"kind": "adamw", "lr": 0.001},\n "units": [{"name": "u", "tensors": [{"name": "w", "shape": [33554432]}]}]}\n' >"$dir/gpustep.json"
		ctl job create "$dir/gpustep.json" >/dev/null
		"$bin/bench_gpu" "$addr" "$REPS"
		ctl job delete gpustep >/dev/null
		if [ -x "$venv/bin/python" ] && [ -f "$root/build/lib/libzsgpu.so" ]; then
			env -u LD_LIBRARY_PATH "$venv/bin/python" "$root/bench/gpu_adamw.py" \
				"$root/build/lib/libzsgpu.so" $((64 << 20)) "$REPS" || echo "(the torch comparison failed)"
		fi
		echo
		echo "(ratio: staging, one pinned copy's time over the staged pieces'; the step, device mode's time over host buffers'; AdamW, zshard's GB/s over the baseline's)"
	else
		echo "(no GPU rows: this build has no nvcc)"
	fi
} | tee "$out/gpu.md"

# ---- pushes from device memory: a cluster of its own, its server on the
# device (the emulated one always, GPU 0 where there is one)
{
	echo
	echo "## Pushes from device memory against pushes through host staging ($today)"
	echo
	echo "| what | baseline | baseline time | zshard | zshard time | zshard / baseline |"
	echo "|---|---|---:|---|---:|---:|"
	devs=emulated
	"$bin/zshardctl" gpu >/dev/null 2>&1 && devs="emulated 0"
	for dv in $devs; do
		ddir=$(mktemp -d /tmp/zshard-bench-dev-XXXXXX)
		if daddr=$("$launcher" start --servers 1 --capacity 8G --dir "$ddir" \
			--server-opt --gpu --server-opt "$dv" 2>/dev/null); then
			printf '{"name": "devpush", "stage": 3, "world_size": 1, "compute_dtype": "f32",\n "optimizer": {"kind": "adamw", "lr": 0.001},\n "units": [{"name": "u", "tensors": [{"name": "w", "shape": [16777216]}]}]}\n' >"$ddir/devpush.json"
			"$bin/zshardctl" --coordinator "$daddr" job create "$ddir/devpush.json" >/dev/null
			ZSHARD_DEV_EMU_DELAY_US=0 "$bin/bench_devpush" "$daddr" devpush "$dv" "$REPS" ||
				echo "(device $dv: the benchmark failed, above)"
		else
			echo "(device $dv: its cluster did not start)"
		fi
		"$launcher" stop --dir "$ddir" >/dev/null 2>&1 || true
		rm -rf "$ddir"
	done
	echo
	echo "(ratio: the step's time with pushes from device memory over its time through host staging; on the emulated device the copies saved are the host's memcpys)"
} | tee "$out/devpush.md"

"$root/bench/summary.sh" "$out" | tee "$out/summary.md"

if command -v gnuplot >/dev/null 2>&1; then
	"$root/bench/plot.sh" "$out"
else
	echo "bench: no gnuplot, so no plots (as root: apt-get install gnuplot-nox)"
fi
