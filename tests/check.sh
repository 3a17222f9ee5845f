#!/bin/sh
# check.sh - make check's parts after the build, each named and timed: the
# test binaries (twice: servers on the host, then on --gpu emulated), the
# layering, exports and install, the CUDA checks, netns, fuzz, the shell
# suites, the fault matrices, python, torch, the wheel and rdma on
# Soft-RoCE. It ends with one line per part (its status and seconds) and a
# last line naming every part that failed, so that the end of a long log
# says what failed and what took the time. The Makefile passes its
# variables in the environment (BUILD, SAN, PYTHON, ...).
#
#   tests/check.sh   (from the repository root; exit 0 when every part passed)
# shellcheck disable=SC2086 # the lists (tests, fuzz targets, fault trials, $MAKE) are meant to split
set -u
bin=$(cd "$BUILD/bin" && pwd)
libzs=$(cd "$(dirname "$LIBZS_SO")" && pwd)/$(basename "$LIBZS_SO")
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
failed=""

# part NAME CMD...: runs CMD, records its status (0 passed, 77 skipped,
# other failed) and seconds
part() {
	name=$1
	shift
	t0=$(date +%s)
	"$@"
	r=$?
	s=$(($(date +%s) - t0))
	case $r in
	0) st=passed ;;
	77) st=skipped ;;
	*) st="FAILED (exit $r)"; failed="$failed $name" ;;
	esac
	printf '%-28s %-18s %5d s\n' "$name" "$st" "$s" >>"$summary"
}

tests_host() {
	ZSHARD_BIN=$bin sh tests/run-tests.sh "$BUILD/tests" $UNIT_TESTS $INTEG_TESTS
}
# the binaries whose subject is where shards live, again with the servers
# keeping them on an emulated device; the liveness tests (test_crash's: a
# dead trainer, a stopped or marked-down server, a lapsed lease;
# test_failover's: a live primary's answer, a server lost while no
# coordinator served, two down at once) are left out: they time the
# control plane, whatever holds the shards
tests_emulated() {
	echo "check: test_crash's and test_failover's liveness tests run with the servers on the host only"
	ZSHARD_TEST_SKIP='*liveness*' \
	ZSHARD_TEST_SERVER_GPU=emulated ZSHARD_TEST_LABEL="servers --gpu emulated" \
		ZSHARD_BIN=$bin sh tests/run-tests.sh "$BUILD/tests" train driver ckpt transfer crash device \
		collective scale replica failover >"$BUILD/gpu-servers.log" 2>&1 &&
		tail -1 "$BUILD/gpu-servers.log" && return 0
	cat "$BUILD/gpu-servers.log"
	return 1
}
cuda() {
	if [ -z "$HAVE_NVCC" ]; then
		echo "check: cuda checks skipped: no nvcc"
		return 77
	fi
	r=0
	sh tests/gpu/check-ptx.sh "$NVCC" "$NVCC_IEEE" || r=1
	CC="$CC" sh tests/gpu/check-cuda-abi.sh "$CUDA_HOME" || r=1
	return $r
}
fuzz() {
	if [ "$SAN" = 1 ]; then
		echo "check: fuzz skipped under the sanitizers (its build has them; make check runs it)"
		return 77
	fi
	if ! command -v "$FUZZ_CC" >/dev/null 2>&1; then
		echo "check: fuzz skipped: no $FUZZ_CC (Debian's clang-14)"
		return 77
	fi
	if ! $FUZZ_MAKE >"$BUILD/fuzz-build.log" 2>&1; then
		tail -30 "$BUILD/fuzz-build.log"
		echo "check: fuzz build FAILED"
		return 1
	fi
	FUZZ_SEED=1 sh tests/fuzz/run.sh "$FUZZ_BUILD" 3 $FUZZ_TARGETS
}
# a suite that exits 77 has said why it skips
suite() {
	sh "tests/integration/$1.sh" "$bin"
	r=$?
	[ $r -eq 77 ] && echo "check: $1 skipped (the reason is above)"
	return $r
}
faults() {
	ZSHARD_BIN=$bin python3 tests/faults/faults.py "$@"
	r=$?
	[ $r -eq 77 ] && echo "check: faults $* skipped (the reason is above)"
	return $r
}
python_tests() {
	if [ "$SAN" = 1 ]; then
		echo "check: python skipped under the sanitizers (python would need libasan preloaded)"
		return 77
	fi
	if ZSHARD_LIB=$libzs ZSHARD_BIN=$bin timeout 600 "$PYTHON" tests/python/test_zshard.py \
		>"$BUILD/python-test.log" 2>&1; then
		echo "check: python: $(sed -n 's/^Ran \([0-9]*\) test.*/\1/p' "$BUILD/python-test.log") tests passed"
		return 0
	fi
	cat "$BUILD/python-test.log"
	echo "check: python FAILED"
	return 1
}
# torch_script LIMIT SCRIPT: one of the torch suites, appended to the log
torch_script() {
	ZSHARD_LIB=$libzs ZSHARD_BIN=$bin timeout "$1" env -u LD_LIBRARY_PATH \
		"$TORCH_VENV/bin/python" "tests/python/$2" >>"$BUILD/torch-test.log" 2>&1
}
# the torch venv (a minute or more of pip unpacking torch from its cache,
# longer from PyPI) is made in the background while the first parts run;
# the torch part waits for it
venv_pid=""
venv_start() {
	[ "$SAN" = 1 ] && return 0
	sh tools/torch-venv.sh "$TORCH_VENV" >"$BUILD/torch-venv.log" 2>&1 &
	venv_pid=$!
}
venv_wait() {
	if [ -n "$venv_pid" ]; then
		wait "$venv_pid"
	else
		sh tools/torch-venv.sh "$TORCH_VENV" >"$BUILD/torch-venv.log" 2>&1
	fi
	r=$?
	cat "$BUILD/torch-venv.log"
	[ $r -eq 0 ] || echo "check: the torch venv ($TORCH_VENV) could not be made (exit $r)"
	return $r
}
torch_tests() {
	if [ "$SAN" = 1 ]; then
		echo "check: torch skipped under the sanitizers (as python)"
		return 77
	fi
	: >"$BUILD/torch-test.log"
	if venv_wait && torch_script 900 test_torch.py &&
		torch_script 600 test_torch_loop.py && torch_script 900 test_hf.py &&
		torch_script 600 test_dcp.py && torch_script 300 test_reader.py &&
		torch_script 300 test_habits.py && torch_script 120 test_quant.py; then
		grep -E '^check: (torch|hf|dcp|reader|habits|quant)|^test_(hf|dcp|reader|habits):' \
			"$BUILD/torch-test.log"
		return 0
	fi
	cat "$BUILD/torch-test.log"
	echo "check: torch FAILED"
	return 1
}
wheel() {
	if [ "$SAN" = 1 ]; then
		echo "check: wheel skipped under the sanitizers (a wheel is an optimized build)"
		return 77
	fi
	if timeout 900 sh tests/python/wheel.sh "$BUILD" "$TORCH_VENV" >"$BUILD/wheel-test.log" 2>&1; then
		grep '^check: wheel' "$BUILD/wheel-test.log"
		return 0
	fi
	cat "$BUILD/wheel-test.log"
	echo "check: wheel FAILED"
	return 1
}
rdma() {
	if [ "$SAN" = 1 ]; then
		echo "check: rdma on Soft-RoCE skipped under the sanitizers (make check runs it)"
		return 77
	fi
	sh tests/rdma/run.sh "$BUILD"
	r=$?
	if [ $r -eq 77 ]; then
		echo "check: rdma on Soft-RoCE skipped (the reason is above)"
	elif [ $r -eq 0 ]; then
		echo "check: rdma on Soft-RoCE passed"
	else
		echo "check: rdma on Soft-RoCE FAILED"
	fi
	return $r
}

venv_start
# the deterministic simulator: the kept seeds, then a fixed number more
# (a fixed count: the same seeds every run; the budget only caps a slow
# machine); in the mutant build, each kept seed must find the planted bug
# it is kept for (the search for them all from seed 1, about 20 s more, is
# make sim-mutants); the fleet's time model, a short run of it
# (sim/fleet.c; bench/fleet.py checks it against the harness) (sim/,
# docs/DESIGN.md)
sim() {
	"$bin/zshard-sim" --regressions sim/regressions &&
		"$bin/zshard-sim" --seeds 15000 --budget-s 120 &&
		"$BUILD/sim-mut/zshard-sim" --regressions sim/regressions &&
		"$bin/zshard-sim" --fleet --runs 20 --steps 2000 >"$BUILD/fleet.txt" &&
		tail -n 5 "$BUILD/fleet.txt"
}
part tests tests_host
part sim sim
part tests-gpu-emulated tests_emulated
part layers-env-exports-install $MAKE --no-print-directory check-layers check-env check-exports \
	check-version check-man check-install
part cuda cuda
part netns suite netns
part fuzz fuzz
part advertise suite advertise
part resize suite resize
part config suite config
part readme suite readme
part multihost suite multihost
part deploy sh tests/deploy/check.sh "$bin" "$BUILD"
part slurm sh tests/deploy/slurm.sh "$bin"
part tls suite tls
part rekey suite rekey
part pause suite pause
part lost suite lost
part roles suite roles
part options suite options
part prometheus suite prometheus
part decommission sh tests/ops/decommission.sh "$bin"
part faults faults $CHECK_FAULTS
part faults-replicas faults $CHECK_FAULTS_REPLICAS
part faults-skew faults $CHECK_FAULTS_SKEW
part faults-shm faults $CHECK_FAULTS_SHM
part ha suite ha
part faults-etcd faults $CHECK_FAULTS_HA
part python python_tests
part torch torch_tests
part wheel wheel
part rdma rdma

echo
echo "check: the parts (skipped ones said why above)"
cat "$summary"
if [ -n "$failed" ]; then
	echo "check: FAILED:$failed"
	exit 1
fi
echo "check: every part passed"
