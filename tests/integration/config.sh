#!/bin/sh
# config.sh - one launch configuration file for a whole local cluster: the
# coordinator and two servers started with --config FILE (one overriding a
# value with a flag, which wins), zshardctl and the trainers reading it from
# $ZSHARD_CONFIG alone (no coordinator given anywhere else, the transport
# and prefetch from the file); the example model trains bitwise equal to
# the reference. A file with a mistake stops a daemon at start, naming the
# line, and zshardctl config check says the same.
#
#   tests/integration/config.sh BIN_DIR
#
# Leaves no process or directory behind.
set -u
name=config bin=$1
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
zs_begin config
port=$(free_port)
cat >"$dir/zshard.conf" <<CONF
# the cluster
coordinator = 127.0.0.1:$port
stage = 2
transport = tcp
prefetch = 2
coordinator.listen = 127.0.0.1:$port
coordinator.data_dir = $dir/coord
coordinator.lease_ms = 4000
server.capacity = 200M
server.landing_budget = 64M
CONF
"$bin/zshardctl" config check "$dir/zshard.conf" >"$dir/check.log" 2>&1 ||
	fail "config check refused a good file: $(cat "$dir/check.log")"
grep -q "zshard-server takes: --coordinator=127.0.0.1:$port --capacity=200M --landing-budget=64M" \
	"$dir/check.log" || fail "config check: $(cat "$dir/check.log")"

"$bin/zshard-coordinator" --config "$dir/zshard.conf" >"$dir/coord.log" 2>&1 &
pids="$pids $!"
"$bin/zshard-server" --config "$dir/zshard.conf" --data-dir "$dir/s0" >"$dir/s0.log" 2>&1 &
pids="$pids $!"
"$bin/zshard-server" --config "$dir/zshard.conf" --data-dir "$dir/s1" --capacity 300M \
	>"$dir/s1.log" 2>&1 &
pids="$pids $!"
export ZSHARD_CONFIG="$dir/zshard.conf"
unset ZSHARD_COORDINATOR
addr=127.0.0.1:$port
zctl() { "$bin/zshardctl" "$@"; }
i=0
until [ "$(zctl servers 2>/dev/null | grep -c ' up ')" -ge 2 ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
[ $i -lt 100 ] || fail "the servers did not register (zshardctl found the coordinator through ZSHARD_CONFIG?)"
zctl status | grep -q "lease 4000 ms" || fail "the coordinator did not take its lease from the file"
caps=$(zctl servers --json | "$PY" -c 'import json, sys; print(" ".join(sorted(str(s["capacity"] >> 20) for s in json.load(sys.stdin)["servers"])))')
[ "$caps" = "200 300" ] || fail "capacities $caps MiB, not 200 (the file) and 300 (a flag over it)"

"$bin/charlm" --print-spec --job conf --world 2 --stage 3 >"$dir/conf.json"
zctl job create "$dir/conf.json" >/dev/null || fail "cannot create the job"
# a spec that names no stage takes the file's (one that names one keeps it)
grep -v '"stage"' "$dir/conf.json" | sed 's/"conf"/"staged"/' >"$dir/staged.json"
zctl job create "$dir/staged.json" >/dev/null || fail "cannot create a job without a stage"
zctl job show staged --json | grep -q '"stage": 2' || fail "the file's stage did not apply"
zctl job show conf --json | grep -q '"stage": 3' || fail "the file's stage overrode the spec's"
zctl job delete staged >/dev/null || fail "cannot delete the staged job"
train_pair " from the configuration alone" --job conf
like_reference "$dir/conf.json"
zctl stats conf --json | "$PY" -c '
import json, sys
r = json.load(sys.stdin)["ranks"]
assert r and all(x["prefetch"] == 2 for x in r), r' 2>"$dir/stats.log" ||
	fail "the trainers did not take prefetch = 2 from the file: $(cat "$dir/stats.log")"

# a mistake: the daemon stops at start, naming the line
printf 'server.capacity = 200M\nserver.capcity = 1G\n' >"$dir/bad.conf"
"$bin/zshard-server" --config "$dir/bad.conf" --data-dir "$dir/bad" >"$dir/bad.log" 2>&1 &&
	fail "a server started from a file with an unknown key"
grep -q "bad.conf:2: unknown key 'server.capcity'" "$dir/bad.log" || fail "bad file: $(cat "$dir/bad.log")"
"$bin/zshardctl" config check "$dir/bad.conf" >/dev/null 2>&1 && fail "config check took an unknown key"
# every mistake of a file at once, an unknown key with the one it looks like
cat >"$dir/bad2.conf" <<BAD
server.data_dri = $dir/x
data_dir = $dir/y
server.capacity = lots
coordinator.lease_ms = 5
transprot = tcp
garbage
BAD
"$bin/zshardctl" config check "$dir/bad2.conf" >"$dir/bad2.log" 2>&1 &&
	fail "config check took a file with six mistakes"
for want in "bad2.conf:1: unknown key 'server.data_dri': did you mean 'server.data_dir'?" \
	"bad2.conf:2: unknown key 'data_dir': did you mean 'server.data_dir' or 'coordinator.data_dir'?" \
	"bad2.conf:3: server.capacity: 'lots' is not a size" \
	"bad2.conf:4: coordinator.lease_ms: 5 is out of range" \
	"bad2.conf:5: unknown key 'transprot': did you mean 'transport'?" \
	"bad2.conf:6: want KEY = VALUE" "bad2.conf: 6 mistakes"; do
	grep -qF "$want" "$dir/bad2.log" || fail "config check did not say '$want': $(cat "$dir/bad2.log")"
done
# a spec file that is not there: said plainly (jansson's "line -1 column -1")
"$bin/zshardctl" job create "$dir/none.json" >"$dir/none.log" 2>&1 && fail "job create took no file"
grep -q "job spec $dir/none.json: cannot read it: No such file or directory" "$dir/none.log" ||
	fail "job create of a missing file: $(cat "$dir/none.log")"
echo "config: passed (one file for the coordinator, the servers, zshardctl and the trainers; a flag over it wins; trained bitwise; a mistake named by line; every mistake of a file at once, with the key meant)"
