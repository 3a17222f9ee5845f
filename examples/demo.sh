#!/usr/bin/env bash
# demo.sh - the main job on the local default: a coordinator and 4 shard
# servers on loopback, the example character-level LM registered as a ZeRO-3
# job, its placement table, then a clean stop. (Training through the data
# plane arrives with the data-plane issue; this shows the control plane.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${ZSHARD_DEMO_DIR:-$(mktemp -d /tmp/zshard-demo-XXXXXX)}
ctl="$root/build/bin/zshardctl"
launcher="$root/deploy/local/zshard-local"

cleanup() { "$launcher" stop --dir "$dir" >/dev/null 2>&1 || true; }
trap cleanup EXIT

addr=$("$launcher" start --servers 4 --dir "$dir")
echo "== coordinator at $addr (state in $dir)"
"$ctl" --coordinator "$addr" servers
echo
"$ctl" --coordinator "$addr" job create "$root/examples/charlm.json"
echo
"$ctl" --coordinator "$addr" placement charlm
echo
"$ctl" --coordinator "$addr" status
cleanup
trap - EXIT
echo "== stopped; no zshard process left: $(pgrep -c -f "$dir" || true) running"
