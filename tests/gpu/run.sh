#!/bin/sh
# run.sh BUILD NVCC "IEEE-FLAGS" CUDA_HOME - make test-gpu: every GPU test,
# where a device is (each says why it skips where there is none):
#   the kernels' PTX and the driver API declarations (no device needed);
#   test_gpu: the CUDA kernels against the host's, bit for bit;
#   test_device: trainers in device mode on the emulated device and CUDA;
#   test_collective: collective jobs, through NCCL where two GPUs are;
#   test_train, test_driver, test_ckpt, test_crash, test_device,
#   test_collective with every server on --gpu 0 (device-mode trainers
#   over shm then push from device memory by CUDA IPC, and check it).
# About 2 minutes on one H200 machine once built.
build=$1
nvcc=$2
ieee=$3
cuda=$4
bin=$(cd "$build/bin" && pwd)
# collective jobs' trainers add with the CUDA kernels of this library
ZSHARD_GPU_LIB=$(cd "$build/lib" && pwd)/libzsgpu.so
export ZSHARD_GPU_LIB
rc=0
sh tests/gpu/check-ptx.sh "$nvcc" "$ieee" || rc=1
sh tests/gpu/check-cuda-abi.sh "$cuda" || rc=1
ZSHARD_BIN=$bin sh tests/run-tests.sh "$build/tests" gpu device collective || rc=1
if why=$("$build/tests/test_gpu" --probe); then
	ZSHARD_TEST_SERVER_GPU=0 ZSHARD_TEST_LABEL="servers --gpu 0" ZSHARD_BIN=$bin \
		sh tests/run-tests.sh "$build/tests" train driver ckpt transfer crash device collective || rc=1
else
	echo "check (servers --gpu 0): skipped: $why"
fi
exit $rc
