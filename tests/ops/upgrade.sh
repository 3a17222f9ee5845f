#!/bin/sh
# upgrade.sh - the runbook "Rolling upgrade" (docs/operations.md) while a
# job trains: three servers and a job with two copies of each shard; each
# server in turn is stopped (SIGTERM), started again from "the new
# binaries" (a copy of them in another folder), and waited for (up, no copy
# seeding) before the next; then the coordinator. The job never rolls back,
# its ranks never stop, and its parameters equal the single-process
# reference's: the upgrade cost no step.
#
#   tests/ops/upgrade.sh BIN_DIR
#
# Leaves no process or directory behind.
set -u
name=upgrade bin=$1
. "$(cd "$(dirname "$0")/../integration" && pwd)/common.sh"
zs_begin upgrade
mkdir -p "$dir/new"
cp "$bin/zshard-server" "$bin/zshard-coordinator" "$dir/new/" # the "new version"
port=$(free_port)
addr=127.0.0.1:$port
coord() { # BINDIR
	"$1/zshard-coordinator" --listen "$addr" --data-dir "$dir/coord" --lease-ms 1500 \
		>>"$dir/coord.log" 2>&1 &
	coord_pid=$!
	pids="$pids $!"
}
server() { # I BINDIR
	"$2/zshard-server" --coordinator "$addr" --data-dir "$dir/s$1" --capacity 256M --rdma off \
		>>"$dir/s$1.log" 2>&1 &
	eval "srv$1=\$!"
	pids="$pids $!"
}
coord "$bin"
for i in 1 2 3; do server $i "$bin"; wait_servers $i || fail "server $i did not register"; done
STEPS=600
"$bin/charlm" --print-spec --job up --world 2 --stage 3 |
	"$PY" -c 'import json, sys; s = json.load(sys.stdin); s["replicas"] = 2; print(json.dumps(s))' \
	>"$dir/up.json"
ctl job create "$dir/up.json" >/dev/null || fail "cannot create the job"
for r in 1 0; do # a rank lags 30 ms a step: the run outlasts the upgrade
	"$bin/charlm" --coordinator "$addr" --job up --rank $r --steps $STEPS --print-every 0 \
		--transport tcp --lag-ms 30 --dump "$dir/rank$r.bin" >"$dir/rank$r.log" 2>&1 &
	eval "t$r=\$!"
	pids="$pids $!"
done
settled() { # every server up, no copy seeding
	[ "$(ctl servers | grep -c ' up ')" -ge 3 ] &&
		ctl placement up --json | "$PY" -c 'import json, sys; sys.exit(any(s["seeding"] for s in json.load(sys.stdin)["shards"]))'
}
stepping() { # both ranks past step 5
	ctl stats up --json 2>/dev/null | "$PY" -c 'import json, sys; r = json.load(sys.stdin)["ranks"]; sys.exit(not (len(r) == 2 and min(x["step"] for x in r) >= 5))'
}
wait_until 60 stepping || fail "the job did not start training: $(tail -n 3 "$dir/rank0.log")"
wait_until 30 settled || fail "the job's copies did not settle before the upgrade"
# 2. each server in turn: stopped, the new binaries started, waited for
for i in 1 2 3; do
	eval "p=\$srv$i"
	kill "$p"
	wait "$p"
	server $i "$dir/new"
	wait_until 60 settled || fail "server $i did not come back settled"
	kill -0 "$t0" 2>/dev/null || fail "the run ended before the upgrade did (raise STEPS)"
done
# 3. the coordinator last
kill "$coord_pid"
wait "$coord_pid"
coord "$dir/new"
wait_until 30 settled || fail "the coordinator did not come back"
kill -0 "$t0" 2>/dev/null || fail "the run ended before the upgrade did (raise STEPS)"
wait "$t0" || fail "rank 0 did not train through the upgrade: $(tail -3 "$dir/rank0.log")"
wait "$t1" || fail "rank 1 did not train through the upgrade: $(tail -3 "$dir/rank1.log")"
grep -q "rolling back\|rolled back" "$dir/coord.log" && fail "the job rolled back during the upgrade"
grep -q "resumes at" "$dir/rank0.log" && fail "rank 0 had to resume during the upgrade"
"$bin/charlm" --reference --spec "$dir/up.json" --world 2 --steps $STEPS --dump "$dir/ref.bin" \
	>"$dir/ref.log" 2>&1 || fail "the reference did not run"
cmp -s "$dir/rank0.bin" "$dir/ref.bin" || fail "after the upgrade the parameters differ from the reference"
echo "upgrade: passed (3 servers and the coordinator restarted in turn on new binaries while a replicated job trained $STEPS steps: no rollback, no resume, bitwise the reference)"
