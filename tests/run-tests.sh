#!/bin/sh
# run-tests.sh DIR TEST... - runs each cmocka test binary DIR/test_NAME,
# shows its output, and ends with one summary line over all of them:
# "check: N passed, M failed[, K skipped]". Exits non-zero on any failure,
# including a binary that crashed before printing its summary or ran past
# $ZSHARD_TEST_TIMEOUT seconds (default 900).
dir=$1
shift
export ZSHARD_ROOT="${ZSHARD_ROOT:-$(pwd)}"
passed=0 failed=0 skipped=0 broken=""
log=$(mktemp)
for t in "$@"; do
	bin="$dir/test_$t"
	echo "=== $t"
	# a test that hangs (a wait that lost its bound) fails here, named,
	# instead of holding the whole run
	t0=$(date +%s)
	timeout -k 10 "${ZSHARD_TEST_TIMEOUT:-900}" "$bin" >"$log" 2>&1
	rc=$?
	echo "check: $t took $(($(date +%s) - t0)) s" >>"$log"
	[ "$rc" -eq 124 ] && echo "check: $t did not finish within ${ZSHARD_TEST_TIMEOUT:-900} s: stopped" >>"$log"
	cat "$log"
	# a binary may run several groups: add up every summary line
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {if (NR) print s}')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed.*/\1/p' "$log" | awk '{s+=$1} END {if (NR) print s}')
	s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test(s), listed.*/\1/p' "$log" | awk '{s+=$1} END {if (NR) print s}')
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	skipped=$((skipped + ${s:-0}))
	if [ "$rc" -ne 0 ] && [ -z "$f" ]; then
		# crashed or exited without a cmocka summary
		broken="$broken $t(rc=$rc)"
		failed=$((failed + 1))
	fi
done
rm -f "$log"
[ -n "$broken" ] && echo "check: test binaries that died without a summary:$broken"
# $ZSHARD_TEST_LABEL names a run of the same binaries in another setting
what="check${ZSHARD_TEST_LABEL:+ ($ZSHARD_TEST_LABEL)}"
if [ "$skipped" -gt 0 ]; then
	echo "$what: $passed passed, $failed failed, $skipped skipped"
else
	echo "$what: $passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
