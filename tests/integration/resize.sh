#!/bin/sh
# resize.sh - a job's world size changes while it trains (zshardctl job
# resize): the example model (charlm) at 4 ranks, resized to 2 (ranks 2
# and 3 leave cleanly at the step the coordinator names) and then to 3 (a
# new rank 2 joins and begins at that step), 32 steps in all; then a job of 3 whose rank 1 is lost and never
# replaced shrinks to 2 (rank_lost: shrink). The
# parameters must be bitwise those of the single-process reference that
# changes its world at the same steps (charlm --reference --worlds), the
# job must say its world, the leaving ranks must not stop or roll back the
# job, and a rank beyond the world, a zero world and a collective job's
# resize are refused with clear errors.
#
#   tests/integration/resize.sh BIN_DIR
set -u
name=resize bin=$1
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
zs_begin resize
start_coord --trainer-lease-ms 3000 --trainer-gone-ms 1500
for i in 0 1; do
	"$bin/zshard-server" --coordinator "$addr" --listen 127.0.0.1:0 --data-dir "$dir/s$i" \
		--capacity 256M >"$dir/s$i.log" 2>&1 &
	pids="$pids $!"
done
wait_servers 2 || fail "the servers did not register"
"$bin/charlm" --print-spec --job rs --world 4 --stage 3 >"$dir/rs.json"
ctl job create "$dir/rs.json" >/dev/null || fail "cannot create the job"

# refused before anything trains: bad sizes
ctl job resize rs --world 0 >"$dir/bad.out" 2>&1 && fail "a world of 0 was taken"
ctl job resize rs >"$dir/bad.out" 2>&1 && fail "resize without --world was taken"

STEPS=32
rank() { # r: one rank of the example, slowed so that the resizes land mid-run
	"$bin/charlm" --coordinator "$addr" --job rs --rank "$1" --steps $STEPS --print-every 1 \
		--transport tcp --lag-ms 50 --dump "$dir/rank$1.bin" >"$dir/rank$1.log" 2>&1 &
	eval "r$1=\$!"
	pids="$pids $!"
}
at_step() { # s: rank 0 has printed step s or later
	[ "$(sed -n 's/^rank 0 step *\([0-9]*\) .*/\1/p' "$dir/rank0.log" | tail -1)" -ge "$1" ] 2>/dev/null
}
from_step() { # json: the step its last world change begins at
	"$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["from_step"])' "$1"
}
for r in 0 1 2 3; do rank $r; done
wait_until 120 at_step 3 || fail "rank 0 did not reach step 3"

# 4 -> 2: ranks 2 and 3 leave at the step named
ctl job resize rs --world 2 --json >"$dir/r1.json" || fail "resize to 2: $(cat "$dir/r1.json")"
b1=$(from_step "$dir/r1.json")
[ "$b1" -ge 4 ] && [ "$b1" -lt 20 ] || fail "resize to 2 named step $b1"
# asked again: the same step
ctl job resize rs --world 2 --json >"$dir/r1b.json" || fail "resize to 2 again: $(cat "$dir/r1b.json")"
[ "$(from_step "$dir/r1b.json")" = "$b1" ] || fail "resize to 2 again named another step"
for r in 2 3; do
	eval "p=\$r$r"
	wait "$p" || fail "rank $r did not leave cleanly"
	grep -q "stops before step $b1: rank $r is not in job 'rs' from step $b1" "$dir/rank$r.log" ||
		fail "rank $r did not leave at step $b1: $(tail -2 "$dir/rank$r.log")"
done
# a rank beyond the world cannot join now
"$bin/charlm" --coordinator "$addr" --job rs --rank 3 --steps $STEPS >"$dir/late3.log" 2>&1 &&
	fail "rank 3 joined a job of 2 ranks"
grep -q "rank 3 is out of range" "$dir/late3.log" || fail "rank 3's refusal: $(tail -1 "$dir/late3.log")"

# 2 -> 3: a new rank 2 begins at the step named
# (another resize before that step has run: ESTATE, asked again here;
# test_zshard.py's test_resize checks the refusal with its ranks held)
wait_until 120 at_step $((b1 + 1)) || fail "rank 0 did not pass step $b1"
resize3() { ctl job resize rs --world 3 --json >"$dir/r2.json" 2>&1; }
wait_until 60 resize3 || fail "resize to 3: $(cat "$dir/r2.json")"
b2=$(from_step "$dir/r2.json")
[ "$b2" -gt "$b1" ] && [ "$b2" -lt $STEPS ] || fail "resize to 3 named step $b2"
rank 2
for r in 0 1 2; do
	eval "p=\$r$r"
	wait "$p" || fail "rank $r did not finish"
done
# each change known to rank 0 as the step before it ended (its data's turn)
grep -q "^rank 0: 2 ranks from step $b1 on" "$dir/rank0.log" ||
	fail "rank 0 did not know of the resize to 2 as step $((b1 - 1)) ended"
grep -q "^rank 0: 3 ranks from step $b2 on" "$dir/rank0.log" ||
	fail "rank 0 did not know of the resize to 3 as step $((b2 - 1)) ended"
grep -q "rank 2 resumes at step $b2" "$dir/rank2.log" ||
	fail "the new rank 2 did not begin at step $b2: $(head -3 "$dir/rank2.log")"

# the job: 3 ranks, both changes; never rolled back or stopped
ctl job show rs --json >"$dir/job.json" || fail "job show"
"$PY" - "$dir/job.json" "$b1" "$b2" <<'PYEOF' || fail "the job does not say its world: $(cat "$dir/job.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["world_size"] == 3, j
assert [(c["step"], c["world_size"]) for c in j["world_changes"]] == [(int(sys.argv[2]), 2), (int(sys.argv[3]), 3)], j
assert j["timeline"] == 0 and not j["rollback_reason"], j
PYEOF
ctl stats rs --json >"$dir/stats.json" || fail "stats"
"$PY" - "$dir/stats.json" <<'PYEOF' || fail "the step reports do not say their world: $(cat "$dir/stats.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["world_size"] == 3, s
r = [x for x in s["ranks"] if x["step"] >= 30]
assert r and all(x["world_size"] == 3 for x in r), s["ranks"]
PYEOF
ctl checkpoint list rs --json >"$dir/ck.json" || fail "checkpoint list"
"$PY" - "$dir/ck.json" $STEPS <<'PYEOF' || fail "the final checkpoint does not say its world: $(cat "$dir/ck.json")"
import json, sys
ck = [c for c in json.load(open(sys.argv[1]))["checkpoints"] if c["step"] == int(sys.argv[2])]
assert ck and ck[0]["world_size"] == 3, ck
PYEOF

# bitwise the reference that changes its world at the same steps
"$bin/charlm" --reference --spec "$dir/rs.json" --world 4 --worlds "$b1:2,$b2:3" --steps $STEPS \
	--dump "$dir/ref.bin" >"$dir/ref.log" 2>&1 || fail "the reference did not run"
for r in 0 1 2; do
	cmp -s "$dir/rank$r.bin" "$dir/ref.bin" || fail "rank $r's parameters differ from the reference"
done
# and not the one that never resized (the test can tell)
"$bin/charlm" --reference --spec "$dir/rs.json" --world 4 --steps $STEPS \
	--dump "$dir/ref4.bin" >"$dir/ref4.log" 2>&1 || fail "the 4-rank reference did not run"
cmp -s "$dir/rank0.bin" "$dir/ref4.bin" && fail "the resized run equals the one that was never resized"

# a collective job cannot be resized
sed 's/"name": "rs"/"name": "rsc", "collective": "nccl"/' "$dir/rs.json" >"$dir/rsc.json"
if ctl job create "$dir/rsc.json" >"$dir/rsc.out" 2>&1; then
	ctl job resize rsc --world 2 >"$dir/rsc2.out" 2>&1 && fail "a collective job was resized"
	grep -q "is collective" "$dir/rsc2.out" || fail "the collective refusal: $(cat "$dir/rsc2.out")"
fi
# a rank lost and not replaced within its job's bound: rank_lost shrink.
# Rank 1 of 3 is killed and nothing replaces it: the job rolls back to its
# last checkpoint at 2 ranks, rank 2's trainer taking rank 1's place;
# bitwise the reference that drops to 2 ranks at the step restored
"$PY" - "$dir/rs.json" "$dir/sh.json" <<'PYEOF' || fail "cannot write the shrink job's spec"
import json, sys
s = json.load(open(sys.argv[1]))
s.update(name="sh", world_size=3, rank_lost="shrink", rank_wait_ms=2000, checkpoint_every=4)
json.dump(s, open(sys.argv[2], "w"))
PYEOF
ctl job create "$dir/sh.json" >/dev/null || fail "cannot create the shrink job"
ctl job show sh >"$dir/sh.show" || fail "job show sh"
grep -q "not replaced within 2000 ms: the world shrinks" "$dir/sh.show" ||
	fail "job show does not say rank_lost: $(cat "$dir/sh.show")"
for r in 0 1 2; do
	"$bin/charlm" --coordinator "$addr" --job sh --rank $r --steps 24 --print-every 1 \
		--transport tcp --lag-ms 50 --dump "$dir/sh$r.bin" >"$dir/sh$r.log" 2>&1 &
	eval "s$r=\$!"
	pids="$pids $!"
done
sh_at() { [ "$(sed -n 's/^rank 0 step *\([0-9]*\) .*/\1/p' "$dir/sh0.log" | tail -1)" -ge "$1" ] 2>/dev/null; }
wait_until 120 sh_at 9 || fail "the shrink job's rank 0 did not reach step 9"
kill -9 "$s1"
wait "$s1" 2>/dev/null
wait "$s0" || fail "rank 0 did not finish after the shrink"
wait "$s2" || fail "rank 2 (rank 1 after the shrink) did not finish"
grep -q "rank 2 is rank 1 now" "$dir/sh2.log" || fail "rank 2's trainer did not take rank 1: $(grep -v ' step ' "$dir/sh2.log" | tail -3)"
grep -q "rank_lost: shrink" "$dir/coord.log" || fail "the coordinator does not say why it shrank"
ctl job show sh --json >"$dir/sh.json.out" || fail "job show sh"
s=$("$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["world_size"] == 2, j; print(j["restored_step"])' "$dir/sh.json.out") ||
	fail "the shrunk job: $(cat "$dir/sh.json.out")"
grep -q "rank 0 resumes at step $s" "$dir/sh0.log" || fail "rank 0 did not resume at step $s"
"$bin/charlm" --reference --spec "$dir/sh.json" --world 3 --worlds "$s:2" --steps 24 \
	--dump "$dir/shref.bin" >"$dir/shref.log" 2>&1 || fail "the shrink reference did not run"
cmp -s "$dir/sh0.bin" "$dir/shref.bin" || fail "the shrunk job's parameters differ from the reference"
cmp -s "$dir/sh2.bin" "$dir/shref.bin" || fail "the moved rank's parameters differ from the reference"

echo "resize: passed (4 -> 2 at step $b1, ranks 2 and 3 left cleanly; 2 -> 3 at step $b2, the new rank 2 began there; $STEPS steps bitwise the reference resized at the same steps; bad sizes, a rank beyond the world and a collective job refused; rank 1 of 3 lost and not replaced: the world shrank to 2 from the checkpoint at step $s, rank 2 taking its place, bitwise the reference)"
