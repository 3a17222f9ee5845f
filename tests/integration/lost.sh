#!/bin/sh
# lost.sh - a lost server reaches every rank as a rollback, never as an
# error that ends it: each rank, whatever it waited on (a gather, a push,
# the boundary, a checkpoint's arming), waits for the coordinator's verdict
# and gets ZS_ERESUME, resumes in its own process and finishes.
#
#   1. no replicas: 2 servers, 2 ranks, a checkpoint every 5 steps; server
#      2 killed (SIGKILL) mid-run and started again a second later
#   2. replicas 2: 6 servers, 6 ranks, a checkpoint every 20 steps; the two
#      servers holding both copies of one shard killed 0.3 s apart, each
#      started again a second after its kill: that shard's state is gone
#      with both, the job rolls back (the ranks were told "waited for it
#      ..., and job 'w' was rolled back instead: resume" as ZS_EUNAVAIL
#      before, and all six left)
#
# Both end with no rank exited and the parameters bitwise the reference's.
#
#   tests/integration/lost.sh BIN_DIR
set -u
name=lost bin=$1
. "$(dirname "$0")/common.sh"
zs_begin lost
start_coord --lease-ms 2000
srv() { # I: server I started (again) on its data directory
	"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s$1" --capacity 256M \
		--rdma off >>"$dir/s$1.log" 2>&1 &
	eval "s$1=\$!"
	pids="$pids $!"
}
# run JOB WORLD STEPS EVERY REPLICAS: the job created and its ranks started
run() {
	"$bin/charlm" --print-spec --job "$1" --world "$2" --stage 3 |
		"$PY" -c 'import json, sys; s = json.load(sys.stdin); s["checkpoint_every"] = int(sys.argv[1]); s["replicas"] = int(sys.argv[2]); print(json.dumps(s))' "$4" "$5" \
			>"$dir/$1.json"
	ctl job create "$dir/$1.json" >/dev/null || fail "cannot create job $1"
	r=$(($2 - 1))
	while [ $r -ge 0 ]; do
		"$bin/charlm" --coordinator "$addr" --job "$1" --rank $r --steps "$3" --total "$3" \
			--print-every 10 --transport tcp --lag-ms 20 --dump "$dir/$1-rank$r.bin" \
			>"$dir/$1-rank$r.log" 2>&1 &
		eval "t$r=\$!"
		pids="$pids $!"
		r=$((r - 1))
	done
}
# finish JOB WORLD STEPS: every rank ended well, resumed in its process,
# bitwise the reference
finish() {
	r=0
	while [ $r -lt "$2" ]; do
		eval "p=\$t$r"
		wait "$p" || fail "job $1: rank $r exited after the loss: $(grep -v '^20' "$dir/$1-rank$r.log" | tail -n 2)"
		grep -q "resumes at step" "$dir/$1-rank$r.log" ||
			fail "job $1: rank $r did not resume in its process"
		r=$((r + 1))
	done
	grep -q "job '$1'.*rolling back" "$dir/coord.log" || fail "job $1 did not roll back"
	"$bin/charlm" --reference --spec "$dir/$1.json" --world "$2" --steps "$3" \
		--dump "$dir/$1-ref.bin" >"$dir/$1-ref.log" 2>&1 || fail "the reference of $1 did not run"
	cmp -s "$dir/$1-rank0.bin" "$dir/$1-ref.bin" || fail "job $1: the parameters differ from the reference"
}
reached() { grep -Eq "^rank 0 step +$2 " "$dir/$1-rank0.log"; }

# 1. no replicas (each server registered before the next starts: server
# id I is s$I, and keeps it when started again)
for i in 1 2; do srv $i; wait_servers $i || fail "server $i did not register"; done
run u 2 120 5 1
wait_until 60 reached u 30 || fail "job u did not reach step 30"
kill -9 "$s2"
sleep 1
srv 2
finish u 2 120

# 2. replicas 2 on 6 servers (4 more), both copies of a shard lost
for i in 3 4 5 6; do srv $i; wait_servers $i || fail "server $i did not register"; done
ctl job delete u >/dev/null 2>&1
run w 6 160 20 2
wait_until 60 reached w 40 || fail "job w did not reach step 40"
pair=$(ctl placement w --json | "$PY" -c '
import json, sys
p = json.load(sys.stdin)
by = {}
for s in p["shards"]:
    by.setdefault((s["unit"], s["shard"]), []).append(s["server"])
print(" ".join(str(x) for x in sorted(next(v for v in by.values() if len(v) == 2))))')
set -- $pair
[ $# -eq 2 ] || fail "no shard with two copies in the placement: '$pair'"
eval "a=\$s$1 b=\$s$2"
kill -9 "$a"
sleep 0.3
kill -9 "$b"
sleep 0.7
srv "$1"
sleep 0.3
srv "$2"
finish w 6 160
echo "lost: passed (a server of an unreplicated job killed, then both copies of a replicated job's shard 0.3 s apart: every rank resumed in its process, bitwise the reference)"
