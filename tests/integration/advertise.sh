#!/bin/sh
# advertise.sh - daemons that peers reach at another address than the one
# they listen on (NAT, a container's published ports, a pod): a server
# listens on the wildcard with its ports mapped by a relay (forward.py, as a
# NAT or a container runtime would) and --advertise / --data-advertise name
# the mapped ports; a second server listens on the wildcard and advertises a
# host alone (its bound ports kept). The coordinator lists what they
# advertise, `zshardctl status --server` reaches the first through its
# mapping, the example model trains over tcp through both and equals the
# single-process reference bit for bit, and the relays carried the bytes. A
# server on the wildcard without --advertise refuses to start, saying why.
#
#   tests/integration/advertise.sh BIN_DIR
#
# Leaves no process or directory behind.
set -u
name=advertise bin=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
zs_begin adv
start_coord

# refused: the wildcard, and nothing to tell peers
"$bin/zshard-server" --coordinator "$addr" --listen 0.0.0.0:0 --data-dir "$dir/bad" \
	--capacity 64M >"$dir/bad.log" 2>&1
[ $? -ne 0 ] || fail "a server on 0.0.0.0 without --advertise started"
grep -q "is a wildcard that peers cannot reach: give --advertise" "$dir/bad.log" ||
	fail "no clear error for a wildcard without --advertise: $(tail -1 "$dir/bad.log")"

# server 0: its ports mapped by relays
ctl_port=$(free_port) data_port=$(free_port) map_ctl=$(free_port) map_data=$(free_port)
"$PY" "$here/forward.py" "$map_ctl" "127.0.0.1:$ctl_port" "$dir/f1.ready" "$dir/f1.count" \
	>"$dir/f1.log" 2>&1 &
f1=$!
"$PY" "$here/forward.py" "$map_data" "127.0.0.1:$data_port" "$dir/f2.ready" "$dir/f2.count" \
	>"$dir/f2.log" 2>&1 &
f2=$!
pids="$pids $f1 $f2"
wait_file "$dir/f1.ready" 10 && wait_file "$dir/f2.ready" 10 || fail "the relays did not start"
"$bin/zshard-server" --coordinator "$addr" --listen "0.0.0.0:$ctl_port" \
	--data-listen "0.0.0.0:$data_port" --advertise "127.0.0.1:$map_ctl" \
	--data-advertise "127.0.0.1:$map_data" --data-dir "$dir/s0" --capacity 256M \
	>"$dir/s0.log" 2>&1 &
pids="$pids $!"
# server 1: a host alone, its bound ports kept
"$bin/zshard-server" --coordinator "$addr" --listen 0.0.0.0:0 --advertise 127.0.0.1 \
	--data-dir "$dir/s1" --capacity 256M >"$dir/s1.log" 2>&1 &
pids="$pids $!"
wait_servers 2 || fail "the servers did not register"

ctl servers --json >"$dir/servers.json" || fail "zshardctl servers"
"$PY" - "$dir/servers.json" "$map_ctl" "$map_data" <<'PYEOF' || fail "the servers are not listed at what they advertise: $(cat "$dir/servers.json")"
import json, sys
s = json.load(open(sys.argv[1]))["servers"]
addrs = {(x["addr"], x["data_addr"]) for x in s}
assert ("127.0.0.1:" + sys.argv[2], "127.0.0.1:" + sys.argv[3]) in addrs, addrs
other = [x for x in s if x["addr"] != "127.0.0.1:" + sys.argv[2]][0]
assert other["addr"].startswith("127.0.0.1:") and other["data_addr"].startswith("127.0.0.1:"), other
assert not other["addr"].endswith(":0") and other["addr"] != other["data_addr"], other
PYEOF
ctl status --server "127.0.0.1:$map_ctl" >"$dir/status.log" 2>&1 ||
	fail "status through the mapped control port: $(cat "$dir/status.log")"
grep -q "at 127.0.0.1:$map_ctl" "$dir/status.log" || fail "status does not say the advertised address"

"$bin/charlm" --print-spec --job adv --world 2 --stage 3 >"$dir/adv.json"
ctl job create "$dir/adv.json" >/dev/null || fail "cannot create the job"
train_pair "" --coordinator "$addr" --job adv --transport tcp
like_reference "$dir/adv.json"
kill -TERM "$f1" "$f2"
wait "$f1" 2>/dev/null
wait "$f2" 2>/dev/null
wait_file "$dir/f2.count" 5 || fail "the data relay did not report"
n=$(cat "$dir/f2.count")
[ "$n" -gt 1000000 ] || fail "the data relay carried $n bytes: the trainers did not use the advertised address"
echo "advertise: passed (a wildcard without --advertise refused; ports mapped by a relay and a host alone advertised; trained through them bitwise equal to the reference; $n bytes through the data mapping)"
