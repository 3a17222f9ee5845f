#!/bin/sh
# ha.sh - coordinators on a real 3-member etcd cluster (Debian's etcd-server):
# what an operator meets around the election, beside the kill -9 trials of
# tests/faults/faults.py --etcd (which train through them). Checked:
#   - bad flags are refused with the reason; a coordinator whose etcd is not
#     there says what it waits for, and a client gets a bounded, clear error
#   - one of two coordinators leads; a client given both follows it; the
#     standby refuses a client given it alone, naming the leader
#   - a clean stop (SIGTERM) hands the lead over at once, with the catalog
#     (the job, the servers) intact at the new leader
#   - an etcd member killed (and started again by its supervisor): nothing
#     noticed; two of three stopped (no quorum): the leader steps down and
#     exits within its lease and a few tries, clients fail within their
#     bound saying so, and once etcd is back a coordinator leads again with
#     the catalog intact
#
#   tests/integration/ha.sh BIN_DIR
#
# Exits 77 with the reason where etcd is not installed. Leaves no process
# or directory behind.
set -u
name=ha bin=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
command -v etcd >/dev/null 2>&1 || skip "no etcd (Debian's etcd-server)"
zs_begin ha
zs_cleanup_more() { # the etcd runner stops its members on SIGTERM
	[ -n "${runner:-}" ] && kill "$runner" 2>/dev/null && wait "$runner" 2>/dev/null
	for m in 0 1 2; do pkill -CONT -f -- "--data-dir $dir/etcd-$m" 2>/dev/null; done
	pkill -9 -f -- "--data-dir $dir/etcd-" 2>/dev/null
	return 0
}
C="$bin/zshard-coordinator"

# bad input: refused, saying why
out=$("$C" --etcd 127.0.0.1:1 --data-dir "$dir/x" 2>&1) && fail "--etcd with --data-dir was accepted"
echo "$out" | grep -q "exclude each other" || fail "--etcd with --data-dir: $out"
out=$("$C" --etcd 127.0.0.1:1 --etcd-lease-s 0 2>&1) && fail "--etcd-lease-s 0 was accepted"
echo "$out" | grep -q "etcd-lease-s" || fail "--etcd-lease-s 0: $out"
out=$("$C" --etcd "no-port" --listen 127.0.0.1:0 2>&1) && fail "a bad etcd endpoint was accepted"
echo "$out" | grep -q -- "--etcd: bad address 'no-port'" || fail "a bad etcd endpoint: $out"
[ -d "$dir/x" ] && fail "a refused start made its data dir"

# etcd not there: the coordinator says what it waits for; a client gets a
# clear error within its bound
"$C" --listen 127.0.0.1:0 --port-file "$dir/lone.addr" --etcd "127.0.0.1:$(free_port)" \
	--etcd-lease-s 2 >"$dir/lone.log" 2>&1 &
lone=$!
pids="$pids $lone"
wait_file "$dir/lone.addr" 10 || fail "a coordinator without etcd did not start"
i=0
until grep -qs "waiting for etcd" "$dir/lone.log" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "waiting for etcd (127.0.0.1:" "$dir/lone.log" || fail "no word of what the coordinator waits for"
out=$("$bin/zshardctl" --coordinator "$(cat "$dir/lone.addr")" --timeout-ms 1000 status 2>&1) &&
	fail "a coordinator without etcd answered as leader"
echo "$out" | grep -q "standby and no coordinator leads yet" || fail "client error without etcd: $out"
kill "$lone"
wait "$lone"

# a 3-member etcd cluster, its members restarted when they die
"$PY" "$here/../faults/etcd.py" "$dir" 3 >"$dir/etcd.endpoints" 2>"$dir/etcd-runner.log" &
runner=$!
wait_file "$dir/etcd.endpoints" 40 || fail "the etcd cluster did not start"
E=$(cat "$dir/etcd.endpoints")

pa=$(free_port) pb=$(free_port) ma=$(free_port) mb=$(free_port)
A=127.0.0.1:$pa B=127.0.0.1:$pb L=$A,$B
coord() { # N ADDR METRICS_PORT
	"$C" --listen "$2" --etcd "$E" --etcd-prefix /ha --etcd-lease-s 2 --lease-ms 2000 \
		--metrics "127.0.0.1:$3" >>"$dir/coord-$1.log" 2>&1 &
	eval "c$1=\$!"
	pids="$pids $!"
}
coord a "$A" "$ma"
sleep 0.5 # a leads: the first to campaign
coord b "$B" "$mb"
ctl() { "$bin/zshardctl" --coordinator "$L" --timeout-ms 5000 "$@"; }
leader() { ctl status 2>/dev/null | sed -n 's/^coordinator \([^ ]*\) .*/\1/p'; }
# deadlines, not counts of tries: each try may wait out ctl's 5 s
has_leader() { [ -n "$(leader)" ]; }
leads_now() { [ "$(leader)" = "$1" ]; }
wait_until 20 has_leader
[ "$(leader)" = "$A" ] || fail "the first coordinator does not lead (leader: '$(leader)')"
ctl status | grep -q "leading, catalog in etcd $E" || fail "status does not say it leads: $(ctl status)"
leads() { # METRICS_PORT: the coordinator's zshard_coordinator_leader
	"$PY" -c 'import sys, urllib.request
t = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
print([l.split()[1] for l in t.splitlines() if l.startswith("zshard_coordinator_leader ")][0])' "$1"
}
[ "$(leads "$ma")" = 1 ] && [ "$(leads "$mb")" = 0 ] ||
	fail "zshard_coordinator_leader is not 1 at the leader and 0 at the standby"
out=$("$bin/zshardctl" --coordinator "$B" --timeout-ms 1000 status 2>&1) && fail "the standby answered"
echo "$out" | grep -q "is a standby; the leader is $A" || fail "the standby's refusal: $out"

for s in 0 1; do
	"$bin/zshard-server" --coordinator "$L" --data-dir "$dir/s$s" --capacity 256M --rdma off \
		--listen 127.0.0.1:0 >"$dir/s$s.log" 2>&1 &
	pids="$pids $!"
done
addr=$L
wait_servers 2 || fail "the servers did not register through the list"
"$bin/charlm" --print-spec --job ha --world 2 --stage 3 >"$dir/ha.json"
ctl job create "$dir/ha.json" >/dev/null || fail "cannot create a job through the list"

# a clean stop hands over at once, the catalog intact
t0=$(date +%s%N)
kill "$ca"
wait "$ca"
wait_until 20 leads_now "$B"
[ "$(leader)" = "$B" ] || fail "the standby did not take over from a clean stop"
[ "$(leads "$mb")" = 1 ] || fail "zshard_coordinator_leader is not 1 at the new leader"
echo "ha: a clean stop handed the lead over in $((($(date +%s%N) - t0) / 1000000)) ms"
grep -q "cannot hand the lead over" "$dir/coord-a.log" && fail "the clean stop did not hand over"
ctl jobs | grep -q "^ha " || fail "the job is not in the new leader's catalog"
wait_servers 2 || fail "the servers did not follow the new leader"
coord a "$A" "$ma" # back, as a standby

# an etcd member killed: its supervisor starts it again; nothing noticed
pkill -9 -f -- "--data-dir $dir/etcd-1" || fail "no etcd member 1 to kill"
ctl job show ha >/dev/null || fail "the catalog is not readable with an etcd member down"
ctl stage ha 2 >/dev/null || fail "the catalog is not writable with an etcd member down"
# no quorum (two members stopped): the leader steps down, clients say so
sleep 2 # member 1 back
pkill -STOP -f -- "--data-dir $dir/etcd-0"
pkill -STOP -f -- "--data-dir $dir/etcd-2"
i=0
while kill -0 "$cb" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$cb" 2>/dev/null && fail "the leader did not step down without an etcd quorum (20 s)"
grep -q "lost the lead" "$dir/coord-b.log" || fail "the leader did not say why it stepped down"
t0=$(date +%s)
out=$("$bin/zshardctl" --coordinator "$L" --timeout-ms 2000 jobs 2>&1) &&
	fail "a client was answered with no coordinator leading"
[ $(($(date +%s) - t0)) -le 10 ] || fail "a client waited past its bound without a leader"
echo "$out" | grep -q "no coordinator of $L leads or answers" || fail "client error without a leader: $out"
pkill -CONT -f -- "--data-dir $dir/etcd-0"
pkill -CONT -f -- "--data-dir $dir/etcd-2"
coord b "$B" "$mb" # its supervisor starts it again
wait_until 30 has_leader || fail "no coordinator leads once etcd is back (30 s)"
ctl job show ha --json | grep -q '"stage": 2' || fail "the stage set before the outage was lost"
echo "ha: passed (etcd $E; coordinators $L, led by $(leader) at the end)"
