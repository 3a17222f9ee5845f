#!/bin/sh
# tls.sh - mutual TLS on the control plane: a CA made here (openssl) signs
# one certificate the coordinator, the servers, the trainers (libzshard, by
# ZSHARD_TLS_*) and zshardctl present; the example model trains through it
# bit for bit as the reference. Refused, each with a clear error and
# nothing changed: zshardctl without a certificate, with one from another
# CA, trusting another CA; a plaintext server registering (and a TLS one
# with a plaintext coordinator), each at once and saying which side refused
# what; half a TLS configuration; a key file that holds no key. No key
# material in any log. The daemons' metrics endpoints serve https with
# their certificates (TLS 1.2 or 1.3): scraped with the CA, a plaintext
# request and a client trusting another CA get nothing, and a real
# Prometheus (Debian's, when installed) scrapes the three through
# `zshardctl scrape-targets` with the CA in its tls_config.
#
#   tests/integration/tls.sh BIN_DIR
#
# Needs openssl (Debian's openssl); exits 77 with the reason otherwise.
# Leaves no process or directory behind.
set -u
name=tls bin=$1
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
command -v openssl >/dev/null 2>&1 || skip "no openssl"
zs_begin tls
# ca NAME: a CA; cert NAME CA: a certificate for 127.0.0.1 signed by CA
ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=zshard test $1" -keyout "$dir/$1.key" -out "$dir/$1.pem" 2>/dev/null
}
cert() {
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' \
		>"$dir/ext.cnf"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
		-keyout "$dir/$1.key" -out "$dir/$1.csr" 2>/dev/null &&
		openssl x509 -req -in "$dir/$1.csr" -CA "$dir/$2.pem" -CAkey "$dir/$2.key" \
			-CAcreateserial -days 2 -extfile "$dir/ext.cnf" -out "$dir/$1.pem" 2>/dev/null
}
ca ca && cert node ca && ca other && cert stranger other || fail "openssl could not make the certificates"
T="--tls-ca $dir/ca.pem --tls-cert $dir/node.pem --tls-key $dir/node.key"

# shellcheck disable=SC2086 # T is three flags
start_coord $T --metrics 127.0.0.1:0
for s in 0 1; do
	"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s$s" --capacity 256M $T \
		--metrics 127.0.0.1:0 >"$dir/s$s.log" 2>&1 &
	pids="$pids $!"
done
ctl() { "$bin/zshardctl" --coordinator "$addr" --timeout-ms 3000 "$@"; }
# shellcheck disable=SC2086
wait_servers 2 $T || fail "the servers did not register over TLS"

"$bin/charlm" --print-spec --job tls --world 2 --stage 3 >"$dir/tls.json"
ctl $T job create "$dir/tls.json" >/dev/null || fail "cannot create the job over TLS"
# the trainers take TLS from the environment (libzshard), for them alone
export ZSHARD_TLS_CA="$dir/ca.pem" ZSHARD_TLS_CERT="$dir/node.pem" ZSHARD_TLS_KEY="$dir/node.key"
train_pair " over TLS" --coordinator "$addr" --job tls --transport tcp
unset ZSHARD_TLS_CA ZSHARD_TLS_CERT ZSHARD_TLS_KEY
like_reference "$dir/tls.json"

# metrics over https: the targets say the scheme; each answers with the CA,
# and neither plaintext nor a client trusting another CA gets an answer
ctl $T scrape-targets >"$dir/targets.json" || fail "scrape-targets over TLS"
# (and each says when its certificate expires: node.pem's notAfter)
notafter=$(openssl x509 -enddate -noout -in "$dir/node.pem" | sed 's/^notAfter=//')
"$PY" - "$dir/targets.json" "$dir/ca.pem" "$dir/other.pem" "$notafter" >"$dir/https.log" 2>&1 <<'EOF2' ||
import calendar, json, re, ssl, sys, time, urllib.request
until = calendar.timegm(time.strptime(sys.argv[4], "%b %d %H:%M:%S %Y %Z"))
groups = json.load(open(sys.argv[1]))
targets = [t for g in groups for t in g["targets"]]
assert len(targets) == 3, "scrape-targets lists %d endpoints: %s" % (len(targets), groups)
assert all(g["labels"].get("__scheme__") == "https" for g in groups), "no https scheme: %s" % groups
def get(url, ca):
    ctx = ssl.create_default_context(cafile=ca) if ca else None
    try:
        r = urllib.request.urlopen(url, timeout=10, context=ctx)
        return r.status, r.read().decode()
    except Exception as e:
        return 0, str(e)
for t in targets:
    code, body = get("https://%s/metrics" % t, sys.argv[2])
    assert code == 200 and "process_resident_memory_bytes" in body, "https://%s/metrics: %s %s" % (t, code, body[:200])
    m = re.search(r"^zshard_tls_certificate_expiry_timestamp_seconds (\S+)$", body, re.M)
    assert m and float(m.group(1)) == until, "https://%s/metrics: certificate expiry %s, want %d" % (
        t, m and m.group(1), until)
    code, body = get("http://%s/metrics" % t, None)
    assert code != 200, "http://%s/metrics answered in plaintext" % t
    code, body = get("https://%s/metrics" % t, sys.argv[3])
    assert code != 200 and "CERTIFICATE_VERIFY_FAILED" in body, "another CA: %s %s" % (code, body[:200])
    for v in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):  # old versions refused
        ctx = ssl.create_default_context(cafile=sys.argv[2])
        ctx.minimum_version = ctx.maximum_version = v
        try:
            urllib.request.urlopen("https://%s/metrics" % t, timeout=10, context=ctx)
            raise AssertionError("https://%s took %s" % (t, v))
        except AssertionError:
            raise
        except Exception:
            pass
print("ok")
EOF2
	fail "metrics over https: $(tail -3 "$dir/https.log")"
grep -q "metrics at https://" "$dir/coord.log" || fail "the coordinator does not say it serves https"
# shellcheck disable=SC2086
ctl $T status | grep -q "^metrics: https://" || fail "zshardctl status does not say https: $(ctl $T status)"
# --metrics-clients certified: only a client with a certificate of the CA
# is answered (a second coordinator, its own data dir); without mTLS the
# flag stops the start, saying why
"$bin/zshard-coordinator" --listen 127.0.0.1:0 --data-dir "$dir/c2" --metrics 127.0.0.1:0 \
	--metrics-clients certified >"$dir/c2-plain.log" 2>&1 &&
	fail "--metrics-clients certified started without mutual TLS"
grep -q "needs mutual TLS" "$dir/c2-plain.log" ||
	fail "--metrics-clients certified without TLS: $(tail -1 "$dir/c2-plain.log")"
# shellcheck disable=SC2086
"$bin/zshard-coordinator" --listen 127.0.0.1:0 --data-dir "$dir/c2" --metrics 127.0.0.1:0 $T \
	--metrics-clients certified >"$dir/c2.log" 2>&1 &
pids="$pids $!"
wait_until 30 grep -q "metrics at https://.*certificate of the CA" "$dir/c2.log" ||
	fail "the certified metrics endpoint did not start: $(tail -2 "$dir/c2.log")"
certified=$(sed -n 's|.*metrics at https://\([^/]*\)/metrics.*|\1|p' "$dir/c2.log" | head -1)
"$PY" - "$certified" "$dir" >"$dir/certified.log" 2>&1 <<'EOF2' ||
import ssl, sys, urllib.error, urllib.request
t, d = sys.argv[1], sys.argv[2]
def get(cert):
    ctx = ssl.create_default_context(cafile=d + "/ca.pem")
    if cert:
        ctx.load_cert_chain(d + "/%s.pem" % cert, d + "/%s.key" % cert)
    try:
        r = urllib.request.urlopen("https://%s/metrics" % t, timeout=10, context=ctx)
        return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except Exception as e:
        return 0, str(e)
code, body = get("node")
assert code == 200 and "process_resident_memory_bytes" in body, "with the CA's certificate: %s %s" % (code, body[:200])
code, body = get(None)
assert code == 403 and "certificate" in body, "without a certificate: %s %s" % (code, body[:200])
code, body = get("stranger")
assert code != 200, "another CA's certificate: %s %s" % (code, body[:200])
print("ok")
EOF2
	fail "metrics for certified clients: $(tail -3 "$dir/certified.log")"
if command -v prometheus >/dev/null 2>&1; then
	prom=127.0.0.1:$(free_port)
	cat >"$dir/prometheus.yml" <<EOF2
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: zshard
    tls_config:
      ca_file: $dir/ca.pem
    file_sd_configs:
      - files: ['$dir/targets.json']
  - job_name: certified
    scheme: https
    tls_config:
      ca_file: $dir/ca.pem
      cert_file: $dir/node.pem
      key_file: $dir/node.key
    static_configs:
      - targets: ['$certified']
EOF2
	prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
		--web.listen-address="$prom" >"$dir/prometheus.log" 2>&1 &
	pids="$pids $!"
	i=0
	until [ "$("$PY" - "$prom" <<'EOF2'
import json, sys, urllib.request
try:
    d = json.load(urllib.request.urlopen("http://%s/api/v1/query?query=count(up%%3D%%3D1)" % sys.argv[1], timeout=5))
    print(d["data"]["result"][0]["value"][1])
except Exception:
    print(0)
EOF2
)" = 4 ] || [ $i -ge 120 ]; do sleep 0.5; i=$((i + 1)); done
	[ $i -lt 120 ] || fail "Prometheus does not scrape the 4 https endpoints within 60 s: $(tail -3 "$dir/prometheus.log")"
	prom_said="; a real Prometheus scraped the 3 over https with the CA, and a certified-clients one with a client certificate"
else
	prom_said="; Prometheus skipped: not installed"
fi

ctl $T jobs --json >"$dir/before.json" || fail "jobs over TLS"
sed 's/"tls"/"intruder"/' "$dir/tls.json" >"$dir/intruder.json"
# refused: no certificate; another CA's; trusting another CA; each error
# says TLS and which side refused what (gRPC said "Socket closed")
n=0
for how in "" "--tls-ca $dir/ca.pem --tls-cert $dir/stranger.pem --tls-key $dir/stranger.key" \
	"--tls-ca $dir/other.pem --tls-cert $dir/node.pem --tls-key $dir/node.key"; do
	n=$((n + 1))
	if ctl $how job create "$dir/intruder.json" >"$dir/refused$n.log" 2>&1; then
		fail "a job was created with '${how:-no TLS}'"
	fi
done
grep -q "$addr speaks TLS and this process has no TLS identity" "$dir/refused1.log" ||
	fail "no TLS: $(cat "$dir/refused1.log")"
grep -q "TLS: $addr refused this process's certificate" "$dir/refused2.log" ||
	fail "another CA's certificate: $(cat "$dir/refused2.log")"
grep -q "TLS: this process refused the certificate of $addr (self-signed certificate in certificate chain)" \
	"$dir/refused3.log" || fail "trusting another CA: $(cat "$dir/refused3.log")"
grep -q "TLS: refused a client that presented no certificate" "$dir/coord.log" ||
	fail "the coordinator's log does not say it refused a client without a certificate"
ctl $T jobs --json >"$dir/after.json" || fail "jobs over TLS"
cmp -s "$dir/before.json" "$dir/after.json" || fail "a refused client changed the jobs"
# a plaintext server cannot register and says why at its first try (it
# waited out its bound, 5 minutes by default, saying no coordinator
# answered); the coordinator says a client spoke plaintext
"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/plain" --capacity 64M \
	--coordinator-timeout-ms 60000 >"$dir/plain.log" 2>&1 && fail "a plaintext server registered"
grep -q "$addr speaks TLS and this process has no TLS identity" "$dir/plain.log" ||
	fail "the plaintext server's error: $(tail -2 "$dir/plain.log")"
grep -q "waiting for the coordinator" "$dir/plain.log" && fail "the plaintext server waited"
grep -q "TLS: a client spoke plaintext to this TLS listener" "$dir/coord.log" ||
	fail "the coordinator's log does not say a client spoke plaintext"
# and a TLS server meeting a plaintext coordinator says that
"$bin/zshard-coordinator" --listen 127.0.0.1:0 --data-dir "$dir/pc" --port-file "$dir/pc.addr" \
	>"$dir/pc.log" 2>&1 &
pids="$pids $!"
wait_file "$dir/pc.addr" 60 || fail "the plaintext coordinator did not start"
paddr=$(cat "$dir/pc.addr")
# shellcheck disable=SC2086
"$bin/zshard-server" --coordinator "$paddr" --data-dir "$dir/tlss" --capacity 64M $T \
	--coordinator-timeout-ms 60000 >"$dir/tlss.log" 2>&1 && fail "a TLS server registered with a plaintext coordinator"
grep -q "TLS: $paddr does not speak TLS" "$dir/tlss.log" ||
	fail "the TLS server's error: $(tail -2 "$dir/tlss.log")"
[ "$(ctl $T servers | grep -c ' up ')" = 2 ] || fail "the server count changed"
# half a configuration, and a key file without a key: refused at start
"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/half" --tls-ca "$dir/ca.pem" \
	>"$dir/half.log" 2>&1 && fail "half a TLS configuration started"
grep -q "TLS needs all of --tls-ca, --tls-cert and --tls-key" "$dir/half.log" ||
	fail "half a configuration: $(cat "$dir/half.log")"
ctl --tls-ca "$dir/ca.pem" --tls-cert "$dir/node.pem" --tls-key "$dir/node.pem" jobs \
	>"$dir/nokey.log" 2>&1 && fail "a certificate as the key was taken"
grep -q "no PEM PRIVATE KEY in it" "$dir/nokey.log" || fail "a key without a key: $(cat "$dir/nokey.log")"
# the catalog in etcd over TLS (https:// endpoints): the coordinator's own
# identity; another CA's is refused by etcd, and none at all at start
if command -v etcd >/dev/null 2>&1; then
	ep=$(free_port) pp=$(free_port)
	etcd --name t --data-dir "$dir/etcd" --listen-client-urls "https://127.0.0.1:$ep" \
		--advertise-client-urls "https://127.0.0.1:$ep" --listen-peer-urls "http://127.0.0.1:$pp" \
		--initial-advertise-peer-urls "http://127.0.0.1:$pp" \
		--initial-cluster "t=http://127.0.0.1:$pp" --cert-file "$dir/node.pem" \
		--key-file "$dir/node.key" --trusted-ca-file "$dir/ca.pem" --client-cert-auth \
		--logger zap --log-level error >"$dir/etcd.log" 2>&1 &
	pids="$pids $!"
	"$bin/zshard-coordinator" --listen 127.0.0.1:0 --etcd "https://127.0.0.1:$ep" \
		--etcd-lease-s 2 $T >"$dir/ha.log" 2>&1 &
	pids="$pids $!"
	"$bin/zshard-coordinator" --listen 127.0.0.1:0 --etcd "https://127.0.0.1:$ep" \
		--etcd-lease-s 2 --tls-ca "$dir/ca.pem" --tls-cert "$dir/stranger.pem" \
		--tls-key "$dir/stranger.key" >"$dir/ha-stranger.log" 2>&1 &
	pids="$pids $!"
	i=0
	until grep -qs "leading (etcd https://" "$dir/ha.log" || [ $i -ge 200 ]; do sleep 0.1; i=$((i + 1)); done
	grep -q "leading (etcd https://" "$dir/ha.log" || fail "no coordinator led on etcd over TLS"
	grep -q "waiting for etcd" "$dir/ha-stranger.log" ||
		fail "a coordinator with another CA's certificate was not refused by etcd"
	grep -q "leading (etcd\|standing by: " "$dir/ha-stranger.log" &&
		fail "a coordinator with another CA's certificate reached etcd"
	out=$("$bin/zshard-coordinator" --listen 127.0.0.1:0 --etcd "https://127.0.0.1:$ep" 2>&1) &&
		fail "an https etcd endpoint without a TLS identity was taken"
	echo "$out" | grep -q "needs this process's TLS identity" || fail "https without TLS: $out"
	etcd_said="; etcd over TLS: led, another CA's refused"
else
	etcd_said="; etcd over TLS skipped: no etcd"
fi
# secrets at rest: the daemons' data directories are 0700 and nothing in
# them is readable by group or others (the catalog holds the job's token)
bad=$(find "$dir/coord" "$dir/s0" "$dir/s1" -perm /077 2>/dev/null | head -3)
[ -z "$bad" ] || fail "group or others may read $(echo $bad | tr '\n' ' ')($(stat -c %a $bad | tr '\n' ' '))"
[ "$(stat -c %a "$dir/coord")" = 700 ] || fail "the coordinator's data directory is $(stat -c %a "$dir/coord")"
[ -n "$(find "$dir/coord" -name data.mdb)" ] || fail "no catalog found to check"
# no key material in any log: no PEM block, no line of the key
line=$(sed -n 2p "$dir/node.key")
if grep -l -e "-----BEGIN" -e "$line" "$dir"/*.log >/dev/null 2>&1; then
	fail "key material in $(grep -l -e "-----BEGIN" -e "$line" "$dir"/*.log | head -1)"
fi
echo "tls: passed (mutual TLS: trained bitwise equal; no certificate, another CA's, another CA trusted, a plaintext server and a TLS one meeting a plaintext coordinator refused at once, saying which side refused what, with nothing changed; half a configuration and a non-key refused; no key in the logs; data directories 0700, their files private; metrics over https only (TLS 1.2+), another CA's client refused, an endpoint for certified clients answering only them$prom_said$etcd_said)"
