#!/bin/sh
# run.sh - runs the libFuzzer targets (tests/fuzz/fuzz_*.c) over their seed
# corpora for a while each and reports what each reached.
#
#   tests/fuzz/run.sh FUZZ_BUILD SECONDS TARGET...
#
# $FUZZ_SEED fixes libFuzzer's seed (make check: 1, so that a run is the
# same run each time; make fuzz: a new one each time).
#
# FUZZ_BUILD is the clang build (make fuzz makes it): FUZZ_BUILD/fuzz/ holds
# the targets and the seed writer. Each target's working corpus is
# FUZZ_BUILD/corpus/TARGET: the committed seeds (tests/fuzz/corpus/TARGET),
# the written ones, and what earlier runs found, kept between runs. A
# finding (crash, sanitizer report, leak, timeout) fails the run and leaves
# its input as FUZZ_BUILD/findings/TARGET-*, with the command that replays it.
set -u
b=$1 secs=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$b/corpus/wire" "$b/corpus/rpc" "$b/corpus/safetensors" "$b/corpus/spec" \
	"$b/corpus/etcd" "$b/corpus/config" "$b/findings"
"$b/fuzz/seeds" "$b/corpus" || { echo "fuzz: the seed writer failed"; exit 1; }
rc=0 line=""
for t in "$@"; do
	[ -d "$root/tests/fuzz/corpus/$t" ] && cp -n "$root/tests/fuzz/corpus/$t"/* "$b/corpus/$t/" 2>/dev/null
	log=$b/fuzz-$t.log
	# leaks are checked per input except where the server's own threads
	# outlive an input (wire): there at exit
	leaks=1
	[ "$t" = wire ] && leaks=0
	"$b/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 -timeout=20 -rss_limit_mb=4096 \
		${FUZZ_SEED:+-seed=$FUZZ_SEED} \
		-detect_leaks=$leaks -artifact_prefix="$b/findings/$t-" "$b/corpus/$t" >"$log" 2>&1
	r=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	n=$(ls "$b/corpus/$t" | wc -l)
	if [ $r -ne 0 ]; then
		echo "fuzz: $t FAILED after ${execs:-?} executions:"
		grep -E 'ERROR|SUMMARY|Test unit written|==[0-9]+==' "$log" | head -20
		echo "fuzz: replay with: $b/fuzz/fuzz_$t $(ls -t "$b/findings/$t-"* 2>/dev/null | head -1)"
		rc=1
	fi
	line="$line $t: ${execs:-?} executions, ${cov:-?} edges, corpus $n;"
done
echo "fuzz: ${secs} s each:$line"
exit $rc
