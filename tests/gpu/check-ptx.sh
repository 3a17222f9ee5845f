#!/bin/sh
# check-ptx.sh NVCC "IEEE-FLAGS" - the CUDA kernels are compiled to the host
# kernels' arithmetic: their PTX (with the build's IEEE flags) has no fused
# multiply-add and only round-to-nearest IEEE division and square root,
# while the same source without the flags does fuse (so the check can
# fail). Needs nvcc only, no device: make check runs it.
set -eu
nvcc=$1
ieee=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
fused_total=0
for cu in gpu/*.cu; do
	# shellcheck disable=SC2086
	"$nvcc" -std=c++17 $ieee -arch=compute_90 -I. -ptx -o "$tmp/ieee.ptx" "$cu"
	"$nvcc" -std=c++17 -arch=compute_90 -I. -ptx -o "$tmp/default.ptx" "$cu"
	fma=$(grep -c 'fma\.' "$tmp/ieee.ptx" || true)
	approx=$(grep -cE '(div|sqrt)\.(approx|full)' "$tmp/ieee.ptx" || true)
	ftz=$(grep -c '\.ftz' "$tmp/ieee.ptx" || true)
	fused=$(grep -c 'fma\.' "$tmp/default.ptx" || true)
	fused_total=$((fused_total + fused))
	if [ "$fma" -ne 0 ] || [ "$approx" -ne 0 ] || [ "$ftz" -ne 0 ]; then
		echo "gpu: $cu compiles to $fma fused multiply-adds, $approx approximate divisions or square roots, $ftz flush-to-zero operations with $ieee"
		fail=1
	fi
done
if [ "$fused_total" -eq 0 ]; then
	echo "gpu: nothing in gpu/ that nvcc would fuse by default: this check cannot tell"
	fail=1
fi
[ "$fail" -eq 0 ] && echo "gpu: the CUDA kernels' PTX has no fused multiply-add, no approximate division or square root and no flush to zero ($ieee); nvcc's defaults would fuse"
exit "$fail"
