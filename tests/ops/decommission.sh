#!/bin/sh
# decommission.sh - the runbook "Drain and decommission a server"
# (docs/operations.md), step by step, and what it guards against: a job
# rebalanced off a server must not depend on it afterwards. Three servers,
# a job that checkpoints every 10 steps trained 20; then (1) the job is
# stopped, (2) rebalanced onto servers 1 and 2 (its state moves, and a
# checkpoint is taken there), (3) server 3 is stopped, (4) its removal is
# refused while it is up and while it holds checkpoint records, naming
# them, and done with --drop-checkpoints. Then a routine restart of server
# 1 rolls the job back, reading only servers 1 and 2 (it read the old
# checkpoint's records on server 3 before, and the restore failed until
# server 3 came back), and the job trains on to step 40 bitwise equal to
# a control job that trained 20 steps, stopped cleanly and went on to 40.
#
#   tests/ops/decommission.sh BIN_DIR
#
# Leaves no process or directory behind.
set -u
name=decommission bin=$1
. "$(cd "$(dirname "$0")/../integration" && pwd)/common.sh"
zs_begin decom
start_coord --lease-ms 1500
server() { # i: server i on its own data dir (again after a restart)
	"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s$1" --capacity 256M \
		--rdma off >>"$dir/s$1.log" 2>&1 &
	eval "srv$1=\$!"
	pids="$pids $!"
}
for i in 1 2 3; do server $i; wait_servers $i || fail "server $i did not register"; done
"$bin/charlm" --print-spec --job dc --world 2 --stage 3 |
	"$PY" -c 'import json, sys; s = json.load(sys.stdin); s["checkpoint_every"] = 10; print(json.dumps(s))' \
	>"$dir/dc.json"
# train JOB STEPS TAG: both ranks to STEPS (on from where the job stands)
train() {
	for r in 1 0; do
		"$bin/charlm" --coordinator "$addr" --job "$1" --rank $r --steps "$2" --print-every 0 \
			--transport tcp --dump "$dir/$3$r.bin" >"$dir/$3$r.log" 2>&1 &
		eval "t$r=\$!"
	done
	wait "$t0" || fail "rank 0 of $1 did not train to step $2: $(tail -3 "$dir/${3}0.log")"
	wait "$t1" || fail "rank 1 of $1 did not train to step $2: $(tail -3 "$dir/${3}1.log")"
}
# what the job's parameters are at step 40 when nothing happens between
# steps 20 and 40 (a clean stop and a resume): the same spec, then deleted
sed 's/"dc"/"control"/' "$dir/dc.json" >"$dir/control.json"
ctl job create "$dir/control.json" >/dev/null || fail "cannot create the control job"
train control 20 c20
train control 40 c40
ctl job delete control >/dev/null || fail "cannot delete the control job"
ctl job create "$dir/dc.json" >/dev/null || fail "cannot create the job"
train dc 20 rank
# each server's id, as it registered
sid() { sed -n 's/.*registered with .* as server \([0-9]*\) .*/\1/p' "$dir/s$1.log" | tail -1; }
three=$(sid 3)
others="$(sid 1),$(sid 2)"
[ -n "$three" ] && [ "$others" != "," ] || fail "the servers' ids are not in their logs"

# 1. the job stops (its ranks left cleanly already; the call says so)
ctl job stop dc >"$dir/stop.log" 2>&1 || grep -q "nothing to stop" "$dir/stop.log" ||
	fail "job stop: $(cat "$dir/stop.log")"
# 2. rebalanced onto the others: its state moves, a checkpoint is taken there
ctl rebalance dc --servers "$others" >"$dir/rebalance.log" 2>&1 ||
	fail "rebalance: $(cat "$dir/rebalance.log")"
grep -q "on its new servers" "$dir/rebalance.log" ||
	fail "rebalance took no checkpoint on the new servers: $(cat "$dir/rebalance.log")"
ctl placement dc --json | "$PY" -c "import json, sys; assert all(s['server'] != $three for s in json.load(sys.stdin)['shards'])" 2>"$dir/pl.log" ||
	fail "shards left on server $three: $(cat "$dir/pl.log")"
# 4 (early). up: refused
ctl servers remove "$three" >"$dir/rm0.log" 2>&1 && fail "a server that is up was removed"
grep -q "is up: stop its process first" "$dir/rm0.log" || fail "removing a live server: $(cat "$dir/rm0.log")"
# 3. stopped; down once its lease lapses
kill "$srv3"
wait "$srv3"
wait_until 20 sh -c "\"$bin/zshardctl\" --coordinator $addr servers | grep -q '^$three .* down'" ||
	fail "server $three is not down after its lease"
# 4. its checkpoints' records: refused, naming them; then dropped with it
ctl servers remove "$three" >"$dir/rm1.log" 2>&1 && fail "a server with checkpoint records was removed"
grep -q "holds records of dc checkpoint" "$dir/rm1.log" ||
	fail "the refusal does not name the checkpoints: $(cat "$dir/rm1.log")"
grep -q -- "--drop-checkpoints" "$dir/rm1.log" || fail "the refusal says no remedy: $(cat "$dir/rm1.log")"
ctl checkpoint list dc >"$dir/ck-before.log" 2>&1
ctl servers remove "$three" --drop-checkpoints >"$dir/rm2.log" 2>&1 ||
	fail "remove --drop-checkpoints: $(cat "$dir/rm2.log")"
grep -q "removed from the cluster for good; checkpoints deleted with it: dc checkpoint" "$dir/rm2.log" ||
	fail "the removal does not say what it deleted: $(cat "$dir/rm2.log")"
ctl servers | grep -q "^$three " && fail "server $three is still listed"
ctl checkpoint list dc | grep -q committed || fail "no committed checkpoint is left to roll back to"

# a routine restart of server 1: the job rolls back to the checkpoint on
# the servers it has, then trains on to step 40, bitwise the control job
victim=$srv1
kill -9 "$victim"
wait "$victim" 2>/dev/null
server 1
wait_until 30 sh -c "\"$bin/zshardctl\" --coordinator $addr job show dc --json | grep -q '\"restoring\": false'" ||
	fail "the job's rollback did not end"
ctl job show dc --json >"$dir/show.json"
grep -q '"rollback_reason": ""' "$dir/show.json" && fail "no rollback after server 1 restarted"
"$PY" -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["restore_error"] == "", j' \
	"$dir/show.json" 2>"$dir/re.log" || fail "the rollback failed: $(cat "$dir/re.log")"
train dc 40 again
cmp -s "$dir/again0.bin" "$dir/c400.bin" ||
	fail "after the decommission the parameters at step 40 differ from the control job's"
echo "decommission: passed (stopped, rebalanced with a checkpoint on its new servers, the server's removal refused while up and while holding checkpoint records, then done; a restart rolled the job back from servers 1 and 2 alone; trained on to step 40 bitwise the control)"
