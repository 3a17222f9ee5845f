#!/bin/sh
# check-cuda-abi.sh CUDA_HOME - gpu/cudadrv.c's own declarations of the
# CUDA driver calls match the toolkit's cuda.h (check-cuda-abi.c, compiled
# with -Werror), and the driver exports every name it loads (the toolkit's
# stub libcuda.so lists them). Needs the toolkit, not a device: make check
# runs it.
set -eu
cuda=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
if ! ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -I. -I"$cuda/include" -c \
	-o "$tmp/abi.o" tests/gpu/check-cuda-abi.c; then
	echo "gpu: gpu/cuda_abi.h does not match $cuda/include/cuda.h (above)"
	fail=1
fi
stub=$cuda/lib64/stubs/libcuda.so
names=$(sed -n 's/^[[:space:]]*X(\(cu[A-Za-z0-9_]*\),.*/\1/p' gpu/cuda_abi.h)
n=0
for f in $names; do
	n=$((n + 1))
	if ! nm -D --defined-only "$stub" | awk '{ print $3 }' | grep -qx "$f"; then
		echo "gpu: the CUDA driver ($stub) exports no $f"
		fail=1
	fi
done
if [ "$n" -lt 20 ]; then
	echo "gpu: found only $n calls in gpu/cuda_abi.h: this check cannot tell"
	fail=1
fi
# NCCL, the same way, where the toolkit has it
nn=0
if [ -f "$cuda/include/nccl.h" ]; then
	if ! ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -I. -I"$cuda/include" -c \
		-o "$tmp/nccl.o" tests/gpu/check-nccl-abi.c; then
		echo "gpu: gpu/nccl_abi.h does not match $cuda/include/nccl.h (above)"
		fail=1
	fi
	lib=$(ls "$cuda"/lib64/libnccl.so.2 2>/dev/null | head -1)
	for f in $(sed -n 's/^[[:space:]]*X(\(nccl[A-Za-z0-9_]*\),.*/\1/p' gpu/nccl_abi.h) ncclGetErrorString; do
		nn=$((nn + 1))
		if [ -n "$lib" ] && ! nm -D --defined-only "$lib" | awk '{ print $3 }' | grep -qx "$f"; then
			echo "gpu: NCCL ($lib) exports no $f"
			fail=1
		fi
	done
fi
[ $fail -eq 0 ] && echo "check: gpu: the $n CUDA driver calls and $nn NCCL calls libzshard loads match cuda.h, nccl.h and the libraries' exports"
exit $fail
