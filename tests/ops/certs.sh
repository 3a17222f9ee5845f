#!/bin/sh
# certs.sh - the runbooks "Certificates from nothing" and "Rotate
# certificates without downtime" (docs/operations.md), as written: the
# first runbook's sh block, its addresses made this host's, makes a CA and
# the certificates; a coordinator (--tls-roles required, its own
# certificate of role server) and a server run on them, trainers train with
# theirs, the admin's lists the servers and the on-call operator's may not
# delete the job. Then the rotation: a second CA made by the same block, the
# bundle of both trusted everywhere (each daemon restarted), the new CA's
# certificates issued and used, then the new CA alone; the job trains after
# every phase, and at the end a client of the old CA alone is refused.
#
#   tests/ops/certs.sh BIN_DIR
#
# Leaves no process or directory behind.
set -u
name=certs bin=$1
. "$(cd "$(dirname "$0")/../integration" && pwd)/common.sh"
command -v openssl >/dev/null 2>&1 || skip "no openssl"
zs_begin certs
root=$(cd "$(dirname "$0")/../.." && pwd)
# the runbook's block, this host's addresses for its example ones
awk '/^### 1\. Certificates from nothing/ {on = 1; next} on && /^```sh/ {inb = 1; next}
	inb && /^```/ {exit} inb {print}' "$root/docs/operations.md" |
	sed -e 's/IP:10\.0\.0\.[0-9]*/IP:127.0.0.1/g' >"$dir/certs.sh"
grep -q 'cert coordinator server' "$dir/certs.sh" || fail "no certificates block in the runbook"
mkca() { # FOLDER: the runbook's block run there
	(mkdir -p "$1" && cd "$1" && sh -e "$dir/certs.sh") >"$1.log" 2>&1 ||
		fail "the runbook's certificates block failed: $(tail -5 "$1.log")"
}
mkca "$dir/old"
mkca "$dir/new"
cat "$dir/old/pki/ca.pem" "$dir/new/pki/ca.pem" >"$dir/bundle.pem"

port=$(free_port)
addr=127.0.0.1:$port
# run CA CERTDIR: (re)start the coordinator and the server trusting CA with
# the certificates of CERTDIR, and wait for the server to be up
coord_pid="" srv_pid=""
run() {
	ca=$1 pki=$2
	[ -n "$srv_pid" ] && { kill "$srv_pid"; wait "$srv_pid"; }
	[ -n "$coord_pid" ] && { kill "$coord_pid"; wait "$coord_pid"; }
	n=$(grep -c "listening on" "$dir/coord.log" 2>/dev/null)
	"$bin/zshard-coordinator" --listen "$addr" --data-dir "$dir/coord" --lease-ms 2000 \
		--tls-roles required --tls-ca "$ca" --tls-cert "$pki/coordinator.pem" \
		--tls-key "$pki/coordinator.key" >>"$dir/coord.log" 2>&1 &
	coord_pid=$!
	pids="$pids $!"
	wait_until 20 sh -c "[ \$(grep -c 'listening on' '$dir/coord.log') -gt ${n:-0} ]" ||
		fail "the coordinator did not listen on $addr"
	"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s1" --capacity 256M --rdma off \
		--tls-ca "$ca" --tls-cert "$pki/server-1.pem" --tls-key "$pki/server-1.key" \
		>>"$dir/s1.log" 2>&1 &
	srv_pid=$!
	pids="$pids $!"
	A="--tls-ca $ca --tls-cert $pki/admin.pem --tls-key $pki/admin.key"
	# shellcheck disable=SC2086
	wait_servers 1 $A || fail "the server did not come up trusting $(basename "$ca") with $pki's certificates"
}
# train CA CERTDIR STEPS: both ranks with the trainer's certificate of CERTDIR
train() {
	for r in 1 0; do
		ZSHARD_TLS_CA=$1 ZSHARD_TLS_CERT=$2/trainer.pem ZSHARD_TLS_KEY=$2/trainer.key \
			"$bin/charlm" --coordinator "$addr" --job certs --rank $r --steps "$3" \
			--print-every 0 --transport tcp >"$dir/train$r.log" 2>&1 &
		eval "t$r=\$!"
	done
	wait "$t0" || fail "rank 0 did not train to $3: $(tail -3 "$dir/train0.log")"
	wait "$t1" || fail "rank 1 did not train to $3: $(tail -3 "$dir/train1.log")"
}

# 1. certificates from nothing
run "$dir/old/pki/ca.pem" "$dir/old/pki"
# shellcheck disable=SC2086
ctl $A servers | grep -q ' up ' || fail "the admin's certificate does not list the servers"
"$bin/charlm" --print-spec --job certs --world 2 --stage 3 >"$dir/certs.json"
# shellcheck disable=SC2086
ctl $A job create "$dir/certs.json" >/dev/null || fail "the admin cannot create the job"
train "$dir/old/pki/ca.pem" "$dir/old/pki" 10
O="--tls-ca $dir/old/pki/ca.pem --tls-cert $dir/old/pki/oncall.pem --tls-key $dir/old/pki/oncall.key"
# shellcheck disable=SC2086
ctl $O job delete certs >"$dir/oncall.log" 2>&1 && fail "the on-call operator deleted the job"
grep -q "operator" "$dir/oncall.log" || fail "the operator's refusal: $(cat "$dir/oncall.log")"
echo "certs: the runbook's certificates run a cluster with --tls-roles required; trained; the operator may not delete"

# 2. rotation: the bundle, then the new certificates, then the new CA alone
run "$dir/bundle.pem" "$dir/old/pki"
train "$dir/bundle.pem" "$dir/old/pki" 20
run "$dir/bundle.pem" "$dir/new/pki"
train "$dir/bundle.pem" "$dir/old/pki" 30 # a client with the old certificate still works
train "$dir/bundle.pem" "$dir/new/pki" 40
run "$dir/new/pki/ca.pem" "$dir/new/pki"
train "$dir/new/pki/ca.pem" "$dir/new/pki" 50
old="--tls-ca $dir/old/pki/ca.pem --tls-cert $dir/old/pki/admin.pem --tls-key $dir/old/pki/admin.key"
# shellcheck disable=SC2086
ctl $old --timeout-ms 3000 servers >"$dir/old.log" 2>&1 && fail "a client of the old CA alone was answered after the rotation"
echo "certs: passed (from nothing: a CA and 5 certificates by the runbook's commands, roles required; rotated through the bundle without a lost step: trained to 50)"
