#!/bin/sh
# roles.sh - what a client may do is what its certificate's role says
# (coord/roles.c): a coordinator with mutual TLS and --tls-roles required,
# a server with a "server" certificate, the example model trained with a
# "trainer" one; then every mutating call zshardctl makes, from each role:
# allowed where the role may (a refusal for another reason, such as a job
# with no trainers to stop, shows the role passed), refused otherwise with
# ZS_EPERM naming the role and the call, the job unchanged. Roles come from
# a subjectAltName URI zshard:role:NAME or the subject's OU; a certificate
# naming none, or an unknown role, is refused. A weight reader reads with
# a reader's certificate; a trainer's is refused at the readers' registry.
#
#   tests/integration/roles.sh BIN_DIR
#
# Needs openssl; exits 77 with the reason otherwise. Leaves nothing behind.
set -u
name=roles bin=$1
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
command -v openssl >/dev/null 2>&1 || skip "no openssl"
zs_begin roles
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=zshard roles CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null ||
	fail "openssl could not make the CA"
# cert NAME SUBJECT [URI]: a certificate for 127.0.0.1 signed by the CA
cert() {
	san="IP:127.0.0.1,DNS:localhost${3:+,URI:$3}"
	printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$dir/$1.cnf"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$2" \
		-keyout "$dir/$1.key" -out "$dir/$1.csr" 2>/dev/null &&
		openssl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
			-CAcreateserial -days 2 -extfile "$dir/$1.cnf" -out "$dir/$1.pem" 2>/dev/null ||
		fail "openssl could not make the $1 certificate"
}
cert admin "/CN=ops/O=zshard" zshard:role:admin
cert operator "/CN=oncall/OU=operator/O=zshard"
cert trainer "/CN=gpu-7" zshard:role:trainer
cert reader "/CN=infer/OU=reader"
cert server "/CN=node-1/OU=server"
cert none "/CN=old"
cert bogus "/CN=x" zshard:role:root
T() { echo "--tls-ca $dir/ca.pem --tls-cert $dir/$1.pem --tls-key $dir/$1.key"; }

# shellcheck disable=SC2046 # T gives three flags
start_coord $(T server) --tls-roles required
"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s0" --capacity 256M $(T server) \
	>"$dir/s0.log" 2>&1 &
pids="$pids $!"
as() { # role zshardctl-args...: zshardctl with that role's certificate
	r=$1
	shift
	# shellcheck disable=SC2046
	"$bin/zshardctl" --coordinator "$addr" --timeout-ms 5000 $(T "$r") "$@"
}
i=0
until [ "$(as admin servers 2>/dev/null | grep -c ' up ')" -ge 1 ] || [ $i -ge 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ $i -lt 100 ] || fail "the server with a server certificate did not register"
# a server's certificate of another role: refused at its registration
"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s9" --capacity 64M $(T reader) \
	>"$dir/s9.log" 2>&1 &
p9=$!
pids="$pids $p9"
wait_until 20 grep -q "role 'reader' may not call RegisterServer" "$dir/s9.log" ||
	fail "a server with a reader's certificate was not refused: $(tail -2 "$dir/s9.log")"
kill -9 "$p9" 2>/dev/null

"$bin/charlm" --print-spec --job rj --world 1 --stage 3 >"$dir/rj.json"
"$bin/charlm" --print-spec --job rk --world 1 --stage 3 >"$dir/rk.json"
as admin job create "$dir/rj.json" >/dev/null || fail "the admin could not create a job"
# the trainer trains with its own certificate (libzshard takes TLS from the environment)
ZSHARD_TLS_CA="$dir/ca.pem" ZSHARD_TLS_CERT="$dir/trainer.pem" ZSHARD_TLS_KEY="$dir/trainer.key" \
	"$bin/charlm" --coordinator "$addr" --job rj --rank 0 --steps 6 --print-every 0 \
	--transport tcp >"$dir/rank0.log" 2>&1 || fail "a trainer could not train: $(tail -2 "$dir/rank0.log")"
as admin job show rj --json >"$dir/before.json" || fail "job show"

# expect ROLE allowed|refused CALL zshardctl-args...
n=0
expect() {
	role=$1 want=$2 call=$3
	shift 3
	out=$(as "$role" "$@" 2>&1)
	rc=$?
	if echo "$out" | grep -q "role '$role' may not call $call"; then got=refused; else got=allowed; fi
	[ "$got" = "$want" ] ||
		fail "$role: zshardctl $*: $got, wanted $want (rc $rc: $(echo "$out" | tail -1))"
	if [ "$want" = refused ] && [ $rc -eq 0 ]; then fail "$role: zshardctl $* refused yet exited 0"; fi
	n=$((n + 1))
}
for r in operator trainer reader; do
	expect $r refused DeleteJob job delete rj
	expect $r refused SetStage stage rj 2
	expect $r refused ResizeJob job resize rj --world 2
	expect $r refused Restore checkpoint restore rj latest
	expect $r allowed GetJob job show rj
	expect $r allowed ListJobs jobs
done
expect reader refused CreateJob job create "$dir/rk.json"
expect operator refused CreateJob job create "$dir/rk.json"
expect reader refused StopJob job stop rj
expect trainer refused StopJob job stop rj
expect operator allowed StopJob job stop rj # no trainer in: refused for that, not the role
expect reader refused CreateCheckpoint checkpoint create rj --step 6
expect operator allowed CreateCheckpoint checkpoint create rj --step 6
expect trainer allowed CreateJob job create "$dir/rk.json"
# an eviction: an operator's (rank 0 is not in: refused for that), not a trainer's
out=$(as trainer trainers evict rj 0 2>&1) && fail "a trainer evicted a rank"
echo "$out" | grep -q "role 'trainer' may not evict rank 0" || fail "a trainer's eviction: $out"
out=$(as operator trainers evict rj 0 2>&1)
echo "$out" | grep -q "may not" && fail "an operator could not evict: $out"
# the data plane by role: a reader's (and an operator's) GetJob hands it
# the job's reader token, whose connections gather and nothing else: its
# export is the admin's, byte for byte; its import into a job with no
# parameters yet is refused by the servers (a push), which then take the
# admin's
as admin export rj --out "$dir/admin.safetensors" >/dev/null || fail "the admin's export"
for r in reader operator; do
	as $r export rj --out "$dir/$r.safetensors" >"$dir/rexport.log" 2>&1 ||
		fail "a $r could not export: $(tail -1 "$dir/rexport.log")"
	cmp -s "$dir/admin.safetensors" "$dir/$r.safetensors" || fail "a $r's export differs from the admin's"
	out=$(as $r import rk "$dir/admin.safetensors" 2>&1) && fail "a $r imported parameters"
	echo "$out" | grep -q "proved the job's reader token" || fail "a $r's import: $out"
done
as admin import rk "$dir/admin.safetensors" >"$dir/aimport.log" 2>&1 ||
	fail "the admin could not import after the reader's refusal: $(tail -1 "$dir/aimport.log")"
# weight readers (include/zshard_reader.h): a reader's certificate registers
# with the coordinator, pins the latest step and reads it whole; a
# trainer's is refused at the registry, naming the call
"$PY" -c 'import json, sys
s = json.load(open(sys.argv[1])); s["name"] = "rw"; s["readers"] = {"pins": 2}
json.dump(s, open(sys.argv[1], "w"))' "$dir/rj.json" && cp "$dir/rj.json" "$dir/rw.json"
as admin job create "$dir/rw.json" >/dev/null || fail "the admin could not create rw"
ZSHARD_TLS_CA="$dir/ca.pem" ZSHARD_TLS_CERT="$dir/trainer.pem" ZSHARD_TLS_KEY="$dir/trainer.key" \
	"$bin/charlm" --coordinator "$addr" --job rw --rank 0 --steps 3 --print-every 0 \
	--transport tcp >"$dir/rw0.log" 2>&1 || fail "a trainer could not train rw: $(tail -2 "$dir/rw0.log")"
rd() { # role [args]: read_weights with that role's certificate
	r=$1
	shift
	ZSHARD_TLS_CA="$dir/ca.pem" ZSHARD_TLS_CERT="$dir/$r.pem" ZSHARD_TLS_KEY="$dir/$r.key" \
		"$bin/read_weights" --coordinator "$addr" --job rw "$@"
}
out=$(rd reader 2>&1) || fail "a reader could not read rw: $out"
echo "$out" | grep -q "^step 3: " || fail "a reader's read of rw: $out"
# the checkpoint charlm took at its end, read from the servers' records
# (their ReadCheckpoint, over TLS with the reader's certificate): the live
# step's tensors and CRC32Cs
ck=$(rd reader --checkpoint latest 2>&1) || fail "a reader could not read rw's checkpoint: $ck"
[ "$ck" = "$out" ] || fail "rw's checkpoint read other than its step 3: $(echo "$ck" | tail -1)"
out=$(rd trainer --quiet 2>&1) && fail "a trainer's certificate read as a reader: $out"
echo "$out" | grep -q "role 'trainer' may not call Reader" || fail "a trainer as a reader: $out"
# no credential at all: plaintext to a TLS coordinator
out=$(env -u ZSHARD_TLS_CA -u ZSHARD_TLS_CERT -u ZSHARD_TLS_KEY "$bin/read_weights" \
	--coordinator "$addr" --job rw --quiet 2>&1) && fail "a reader without a certificate read rw: $out"
echo "$out" | grep -q "speaks TLS and this process has no TLS identity" ||
	fail "a reader without a certificate: $out"
# nothing changed by the refusals
as admin job show rj --json >"$dir/after.json" || fail "job show"
"$PY" - "$dir/before.json" "$dir/after.json" <<'PYEOF' || fail "a refused call changed the job"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("stage", "world_size", "timeline", "epoch", "restoring"):
    assert a[k] == b[k], (k, a[k], b[k])
PYEOF
# no role, an unknown role: refused even for reads, saying why
out=$(as none jobs 2>&1) && fail "a certificate naming no role was taken"
echo "$out" | grep -q "names no role" || fail "no role: $out"
out=$(as bogus jobs 2>&1) && fail "a certificate naming role 'root' was taken"
echo "$out" | grep -q "names role 'root', which is none of" || fail "unknown role: $out"
# the admin may do all of it
as admin stage rj 2 >/dev/null || fail "the admin could not set the stage"
as admin job delete rk >/dev/null || fail "the admin could not delete a job"
echo "roles: passed ($n calls from operator, trainer and reader certificates allowed or refused as their roles say, the job unchanged; a trainer trained, a server registered, one with a reader's certificate refused; no role and an unknown role refused; a reader's and an operator's tokens export the admin's bytes and their imports are refused by the servers; a weight reader with a reader's certificate read the latest version and the last checkpoint ($(echo "$ck" | grep -c crc32c) tensors, the same CRC32Cs), one with a trainer's was refused at the readers' registry, one with none could not reach it; the admin does the rest)"
