#!/usr/bin/env bash
# gpt.sh - the PyTorch example on the local default: a coordinator and 2
# shard servers on loopback, examples/gpt.py trained by 2 ranks (torchrun's
# environment: RANK, WORLD_SIZE, ZSHARD_COORDINATOR) at ZeRO stage 3, its
# parameters exported with zshardctl and loaded into a plain nn.Module,
# and a clean stop. PYTHON: a python with torch (make gpt makes one).
set -euo pipefail
. "$(dirname "$0")/cluster.sh"
steps=${ZSHARD_GPT_STEPS:-200}
py=${PYTHON:-python3}
start_cluster 2 "${ZSHARD_GPT_DIR:-$(mktemp -d /tmp/zshard-gpt-XXXXXX)}"
echo "== training: a 4-block GPT, 2 ranks, $steps steps, ZeRO-3, AdamW (2 groups), warmup + cosine"
export ZSHARD_COORDINATOR=$addr WORLD_SIZE=2 OMP_NUM_THREADS=1
unset LD_LIBRARY_PATH
RANK=1 LOCAL_RANK=1 "$py" "$root/examples/gpt.py" --steps "$steps" --print-every 50 \
	>"$dir/rank1.log" 2>&1 &
r1=$!
RANK=0 LOCAL_RANK=0 "$py" "$root/examples/gpt.py" --steps "$steps" --print-every 50 \
	--dump "$dir/gpt.safetensors"
wait $r1 || { cat "$dir/rank1.log"; exit 1; }
cat "$dir/rank1.log"
echo
"$bin/zshardctl" placement gpt
echo
"$bin/zshardctl" export gpt --out "$dir/export.safetensors" --bare-names
"$py" - "$root" "$dir/export.safetensors" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/examples")
import gpt
from safetensors.torch import load_file
sd = load_file(sys.argv[2])
sd["head.weight"] = sd["wte.weight"]  # tied: the job holds it once
m = gpt.GPT()
m.load_state_dict(sd)
x, y = gpt.batch(gpt.load_text(), 7, 0, 0, 8, 128)
print("exported parameters load into a plain GPT: loss on a fresh batch %.4f" % m(x, y).item())
PY
