#!/bin/sh
# pause.sh - a trainer that only pauses loses nothing: rank 1 of a 2-rank
# job is stopped (SIGSTOP) for 5 s three times in a run, within its 10 s
# lease (a long torch.compile, a stalled data loader, swap): first right
# after its resume's reconnect at the start (the moment a server tells the
# coordinator its connections ended: such a rank was taken for gone 3 s
# later and its step redone), then twice mid-run. No rank is taken for
# gone, no step is redone, the job never rolls back, and the parameters
# equal the single-process reference's bit for bit. (A dead trainer is
# still found in seconds: tests/faults/faults.py, kinds trainer*.)
#
#   tests/integration/pause.sh BIN_DIR
set -u
name=pause bin=$1
. "$(dirname "$0")/common.sh"
zs_begin pause
start_coord --log-level debug
for i in 1 2; do
	"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s$i" --capacity 256M \
		--rdma off --log-level debug >"$dir/s$i.log" 2>&1 &
	pids="$pids $!"
done
wait_servers 2 || fail "the servers did not register"
STEPS=300
"$bin/charlm" --print-spec --job pz --world 2 --stage 3 >"$dir/pz.json"
ctl job create "$dir/pz.json" >/dev/null || fail "cannot create the job"
for r in 1 0; do
	"$bin/charlm" --coordinator "$addr" --job pz --rank $r --steps $STEPS --total $STEPS \
		--print-every 10 --lag-ms 20 --dump "$dir/rank$r.bin" >"$dir/rank$r.log" 2>&1 &
	eval "t$r=\$!"
	pids="$pids $!"
done
pause() { # stops rank 1 for 5 s
	kill -STOP "$t1" || fail "rank 1 ended before its pause"
	sleep 5
	kill -CONT "$t1"
}
reconnected() { grep -q "rank 1 has no data connection" "$dir/s1.log" "$dir/s2.log"; }
# 1. at once after its start's reconnect (polled every 10 ms: within the
# second before its next renewal)
i=0
until reconnected || [ $i -ge 3000 ]; do sleep 0.01; i=$((i + 1)); done
reconnected || fail "rank 1 never reconnected (its resume at the start)"
pause
# 2. and 3. mid-run, rank 0 past steps 100 and 200
past() { grep -Eq "^rank 0 step +$1[0-9][0-9] " "$dir/rank0.log"; }
wait_until 120 past 1 || fail "rank 0 did not reach step 100"
pause
wait_until 120 past 2 || fail "rank 0 did not reach step 200"
pause
wait "$t0" || fail "rank 0 did not finish"
wait "$t1" || fail "rank 1 did not finish"
for what in "is gone" "missed its lease" "redoes" "rolling back" "rolled back"; do
	grep -q "$what" "$dir/coord.log" &&
		fail "the coordinator says '$what' of a trainer that only paused: $(grep "$what" "$dir/coord.log" | head -n 1)"
done
grep -q "resumes at step\|rejoined" "$dir/rank1.log" && fail "rank 1 resumed or rejoined: $(grep "resumes\|rejoined" "$dir/rank1.log")"
"$bin/charlm" --reference --spec "$dir/pz.json" --world 2 --steps $STEPS --dump "$dir/ref.bin" \
	>"$dir/ref.log" 2>&1 || fail "the reference did not run"
cmp -s "$dir/rank0.bin" "$dir/ref.bin" || fail "the parameters differ from the reference"
echo "pause: passed (rank 1 stopped 3 times for 5 s, the first right after its reconnect: nobody gone, no redo, no rollback; $STEPS steps bitwise the reference)"
