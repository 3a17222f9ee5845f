#!/bin/sh
# run.sh - the runbooks' tests (docs/operations.md, "Runbooks"): each
# tests/ops/NAME.sh runs its runbook step by step against real daemons.
#
#   tests/ops/run.sh BIN_DIR NAME...
#
# Exit 0 when every one passed (a skip says why and counts as none).
set -u
bin=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
failed="" passed=0
for t in "$@"; do
	t0=$(date +%s)
	sh "$here/$t.sh" "$bin"
	r=$?
	s=$(($(date +%s) - t0))
	case $r in
	0) passed=$((passed + 1)); echo "ops: $t passed in $s s" ;;
	77) echo "ops: $t skipped (the reason is above)" ;;
	*) failed="$failed $t"; echo "ops: $t FAILED (exit $r) after $s s" ;;
	esac
done
if [ -n "$failed" ]; then
	echo "ops: FAILED:$failed"
	exit 1
fi
echo "ops: $passed runbooks passed"
