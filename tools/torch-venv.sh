#!/bin/sh
# torch-venv.sh DIR [--peers] - a virtual environment with what the PyTorch
# side of zshard needs, from PyPI: torch 2.x (the CPU runs of the full
# wheel: there is no CPU-only torch on PyPI), numpy, safetensors,
# transformers and accelerate (the Hugging Face models and Trainer of
# tests/python/test_hf.py); with
# --peers also DeepSpeed (CPU accelerator, no prebuilt ops) for make bench.
# Built once (about 5 minutes and 5 GB the first time, far less from pip's
# cache) and kept: DIR/.ok says what it holds. Debian's python3 and
# python3-venv (tools/install-deps.sh) make it.
set -eu
dir=$1
base="torch>=2.1,<3 numpy safetensors transformers accelerate"
have=$(cat "$dir/.ok" 2>/dev/null || true)
case "${2:-}" in
--peers) [ "$have" = "$base deepspeed" ] && exit 0 ;;
*) [ "$have" = "$base" ] || [ "$have" = "$base deepspeed" ] && exit 0 ;;
esac
echo "zshard: installing $base${2:+ deepspeed} into $dir (once; minutes the first time)"
[ -x "$dir/bin/pip" ] || /usr/bin/python3 -m venv "$dir"
pip="$dir/bin/pip install -q --disable-pip-version-check --retries 10 --timeout 60"
# shellcheck disable=SC2086
$pip $base
if [ "${2:-}" = --peers ]; then
	# DeepSpeed's CPU accelerator; its ops build when first used
	DS_BUILD_OPS=0 DS_ACCELERATOR=cpu $pip deepspeed
fi
# import torch must work (CUDA's own libraries stay out of its way)
env -u LD_LIBRARY_PATH "$dir/bin/python" -c \
	"import torch, numpy, safetensors, transformers; print('zshard: torch', torch.__version__, 'transformers', transformers.__version__)"
echo "$base${2:+ deepspeed}" >"$dir/.ok"
