#!/bin/sh
# backup.sh - the runbook "Back up and restore the catalog and its secret
# key" (docs/operations.md), as written: a job trained 20 steps; its
# catalog copied with the runbook's mdb_copy line while the coordinator
# runs and the key copied apart; the coordinator then lost with its whole
# data directory. Restored without the key, the coordinator refuses to
# start, naming it; restored with it, the servers come back by themselves
# and the job trains on to step 40 bitwise equal to a control job that
# was never disturbed (20 steps, a clean stop, on to 40).
#
#   tests/ops/backup.sh BIN_DIR
#
# Leaves no process or directory behind.
set -u
name=backup bin=$1
. "$(cd "$(dirname "$0")/../integration" && pwd)/common.sh"
command -v mdb_copy >/dev/null 2>&1 || skip "no mdb_copy (Debian's lmdb-utils)"
zs_begin backup
root=$(cd "$(dirname "$0")/../.." && pwd)
port=$(free_port)
addr=127.0.0.1:$port
data=$dir/var/lib/zshard/coordinator
coord() {
	"$bin/zshard-coordinator" --listen "$addr" --data-dir "$data" --lease-ms 1500 \
		>>"$dir/coord.log" 2>&1 &
	coord_pid=$!
	pids="$pids $!"
}
coord
for i in 1 2; do
	"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s$i" --capacity 256M --rdma off \
		>>"$dir/s$i.log" 2>&1 &
	pids="$pids $!"
done
wait_servers 2 || fail "the servers did not register"
train() { # JOB STEPS TAG
	for r in 1 0; do
		"$bin/charlm" --coordinator "$addr" --job "$1" --rank $r --steps "$2" --print-every 0 \
			--transport tcp --dump "$dir/$3$r.bin" >"$dir/$3$r.log" 2>&1 &
		eval "t$r=\$!"
	done
	wait "$t0" || fail "rank 0 of $1 did not train to step $2: $(tail -n 3 "$dir/${3}0.log")"
	wait "$t1" || fail "rank 1 of $1 did not train to step $2: $(tail -n 3 "$dir/${3}1.log")"
}
"$bin/charlm" --print-spec --job bk --world 2 --stage 3 |
	"$PY" -c 'import json, sys; s = json.load(sys.stdin); s["checkpoint_every"] = 10; print(json.dumps(s))' \
	>"$dir/bk.json"
sed 's/"bk"/"control"/' "$dir/bk.json" >"$dir/control.json"
ctl job create "$dir/control.json" >/dev/null || fail "cannot create the control job"
train control 20 c20
train control 40 c40
ctl job delete control >/dev/null || fail "cannot delete the control job"
ctl job create "$dir/bk.json" >/dev/null || fail "cannot create the job"
train bk 20 a

# the runbook's two lines, in a folder of their own (the paths its)
awk '/^### 6\. Back up and restore/ {on = 1; next} on && /^```sh/ {inb = 1; next}
	inb && /^```/ {exit} inb {print}' "$root/docs/operations.md" |
	sed "s|/var/lib/zshard/coordinator|$data|g" >"$dir/backup.sh"
grep -q mdb_copy "$dir/backup.sh" || fail "no backup block in the runbook"
mkdir -p "$dir/ops/backup" "$dir/ops/keys"
(cd "$dir/ops" && sh -e "$dir/backup.sh") >"$dir/backup.log" 2>&1 ||
	fail "the runbook's backup failed: $(cat "$dir/backup.log")"
[ -s "$dir/ops/backup/data.mdb" ] && [ -s "$dir/ops/keys/secret.key" ] || fail "the backup left no copy"

# the coordinator and its whole data directory lost
kill -9 "$coord_pid"
wait "$coord_pid" 2>/dev/null
rm -rf "$data"
# restored without the key: refused, naming it
mkdir -p "$data" && chmod 700 "$data" && cp "$dir/ops/backup/data.mdb" "$data/"
"$bin/zshard-coordinator" --listen "$addr" --data-dir "$data" >"$dir/nokey.log" 2>&1 &&
	fail "the coordinator started on a sealed catalog without its key"
grep -q "secret" "$dir/nokey.log" || fail "no key, no word of it: $(cat "$dir/nokey.log")"
# with it: as it was at the copy
cp "$dir/ops/keys/secret.key" "$data/secret.key" && chmod 600 "$data/secret.key"
coord
wait_servers 2 || fail "the servers did not come back to the restored coordinator"
ctl jobs | grep -q "^bk " || fail "the restored catalog has no job bk"
train bk 40 b
cmp -s "$dir/b0.bin" "$dir/c400.bin" ||
	fail "after the restore the parameters at step 40 differ from the control job's"
echo "backup: passed (the runbook's mdb_copy of a running catalog and its key; without the key the restored coordinator refuses, naming it; with it the job trained on to step 40, bitwise the undisturbed control)"
