#!/usr/bin/env bash
# demo.sh - the main job on the local default: a coordinator and 4 shard
# servers on loopback, the example character-level LM (examples/charlm.c)
# trained by 2 trainers at ZeRO stage 3 through them, the loss curve's ends,
# the placement table, a check against the single-process reference, and a
# clean stop.
set -euo pipefail
. "$(dirname "$0")/cluster.sh"
steps=${ZSHARD_DEMO_STEPS:-300}
start_cluster 4 "${ZSHARD_DEMO_DIR:-$(mktemp -d /tmp/zshard-demo-XXXXXX)}"
"$bin/zshardctl" --coordinator "$addr" job create "$root/examples/charlm.json"
echo
echo "== training: 2 trainers, $steps steps, ZeRO-3, one unit of prefetch"
"$bin/charlm" --coordinator "$addr" --rank 1 --steps "$steps" --print-every 100 \
	--dump "$dir/rank1.bin" >"$dir/rank1.log" 2>&1 &
r1=$!
"$bin/charlm" --coordinator "$addr" --rank 0 --steps "$steps" --print-every 100 \
	--dump "$dir/rank0.bin"
wait $r1 || { cat "$dir/rank1.log"; exit 1; }
cat "$dir/rank1.log"
echo
"$bin/zshardctl" --coordinator "$addr" placement charlm
echo
"$bin/zshardctl" --coordinator "$addr" servers
echo
echo "== the oracle: the same 2 ranks in one process, rank-order reduction"
"$bin/charlm" --reference --spec "$root/examples/charlm.json" --world 2 --steps "$steps" \
	--dump "$dir/reference.bin"
if cmp -s "$dir/rank0.bin" "$dir/reference.bin"; then
	echo "parameters after $steps steps: equal to the reference, bit for bit"
else
	echo "parameters after $steps steps DIFFER from the reference" >&2
	exit 1
fi
stop_cluster
echo "== stopped; zshard processes left: $(pgrep -c -f "$dir" || true)"
