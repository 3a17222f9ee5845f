#!/bin/sh
# check-circles-fails.sh - the circle check itself must be able to fail: on
# a copy of the tree with a call planted that closes a circle of four files
# (client/handle.c, which calls nothing else of client/, calling the
# handle's join in client/zshard.c), tools/circles.py must exit non-zero
# and name the file; and engine/, kept without any circle, must fail on
# one of two files (held.c, below the step, completing a step: fx.c).
# Leaves nothing.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "circles-fails: $*"; exit 1; }
allow="--none engine"

for d in base model math gpu storage net ctrl metrics rdma client engine server coord cli; do
	cp -r "$d" "$tmp/$d"
done
python3 tools/circles.py $allow "$tmp" > "$tmp/out" 2>&1 || fail "the clean copy fails: $(cat "$tmp/out")"
cat >> "$tmp/client/handle.c" <<'C'

int tr_planted(void)
{
	return zs_trainer_join(NULL, NULL, 0, NULL, 0, NULL, NULL, 0);
}
C
if python3 tools/circles.py $allow "$tmp" > "$tmp/out" 2>&1; then
	fail "a call from client/handle.c into client/zshard.c was not caught"
fi
grep -q "OVER: .*client/handle.c" "$tmp/out" || fail "the message does not name the file: $(cat "$tmp/out")"

rm -rf "$tmp/client"
cp -r client "$tmp/client"
cat >> "$tmp/engine/held.c" <<'C'

void eng_planted(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx)
{
	eng_step_complete(e, j, s, fx);
}
C
if python3 tools/circles.py $allow "$tmp" > "$tmp/out" 2>&1; then
	fail "a call from engine/held.c into engine/fx.c was not caught"
fi
grep -q "OVER: .*engine/held.c" "$tmp/out" || fail "the message does not name the engine's file: $(cat "$tmp/out")"
echo "circles-fails: the check catches a circle of more than 3 files, and any circle in engine/"
