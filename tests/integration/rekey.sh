#!/bin/sh
# rekey.sh - an encrypted data plane renews its keys (net/records.h): a job
# with "data_tls": true trains with ZSHARD_TLS_RECORDS_PER_KEY lowered to 8
# on its trainers and servers, so that every connection crosses hundreds
# of KeyUpdates each way; a receiver refuses any record past the limit
# under one key, so training through at all means every key was renewed in
# time; the parameters equal the single-process reference's.
#
#   tests/integration/rekey.sh BIN_DIR
#
# Leaves no process or directory behind.
set -u
name=rekey bin=$1
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
zs_begin rekey
export ZSHARD_TLS_RECORDS_PER_KEY=8
start_coord
for s in 0 1; do
	"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s$s" --capacity 256M --rdma off \
		>"$dir/s$s.log" 2>&1 &
	pids="$pids $!"
done
wait_servers 2 || fail "the servers did not register"
"$bin/charlm" --print-spec --job rk --world 2 --stage 3 |
	"$PY" -c 'import json, sys; s = json.load(sys.stdin); s["data_tls"] = True; print(json.dumps(s))' \
	>"$dir/rk.json"
ctl job create "$dir/rk.json" >/dev/null || fail "cannot create the job"
train_pair " with keys renewed every 8 records" --coordinator "$addr" --job rk --transport tcp
grep -q "did not renew its key\|does not open" "$dir"/*.log && fail "a record was refused"
like_reference "$dir/rk.json"
mb=$(grep -o 'gathered [0-9.]* MiB' "$dir/rank0.log" | grep -o '[0-9.]*')
echo "rekey: passed (a data_tls job, keys renewed every 8 records: about $(echo "$mb" | "$PY" -c 'import sys; print(int(float(sys.stdin.read() or 0) * 2**20 / 16384 / 8))') renewals of rank 0's gathers alone; bitwise the reference)"
