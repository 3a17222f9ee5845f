#!/bin/sh
# prometheus.sh - a real Prometheus server scrapes a local cluster while a
# job trains: the coordinator and two shard servers serve /metrics
# (--metrics 127.0.0.1:0), Prometheus finds them through the file that
# `zshardctl scrape-targets` writes (file_sd_configs), and its HTTP API
# must answer, while the example model trains over tcp and shm:
#   - up == 1 for all three targets;
#   - a rate: the bytes pushed per second, summed over servers, > 0;
#   - a histogram quantile: p90 of the gathers' latency, finite and > 0;
#   - the coordinator's and both servers' view of the job's step reach the
#     last step trained;
# and every exposition passes `promtool check metrics` (names, units, types),
# an unknown path answers 404 and a POST 405.
#
#   tests/integration/prometheus.sh BIN_DIR
#
# Needs prometheus and promtool (Debian's prometheus; tools/install-deps.sh
# installs it); exits 77 with the reason otherwise. Leaves no process or
# directory behind.
set -u
name=prometheus bin=$1
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
STEPS=${STEPS:-1000}
command -v prometheus >/dev/null 2>&1 || skip "no prometheus (Debian's prometheus package)"
command -v promtool >/dev/null 2>&1 || skip "no promtool (Debian's prometheus package)"

zs_begin prom
zs_fail_more() { # what the daemons say of the job
	for t in $(cat "$dir/targets" 2>/dev/null); do
		echo "--- http://$t/metrics (the jobs)"
		http GET "http://$t/metrics" >/dev/null && grep '_job_' "$dir/body" | grep -v '^#'
	done
}
# http METHOD URL: prints the status code, the body into $dir/body
http() {
	"$PY" - "$1" "$2" "$dir/body" <<'EOF'
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[2], method=sys.argv[1], data=b"" if sys.argv[1] == "POST" else None)
try:
    r = urllib.request.urlopen(req, timeout=10); code, body = r.status, r.read()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read()
except Exception as e:
    code, body = 0, str(e).encode()
open(sys.argv[3], "wb").write(body)
print(code)
EOF
}
# query EXPR: the first sample's value of an instant query ("" if none)
query() {
	"$PY" - "$prom" "$1" <<'EOF'
import json, sys, urllib.parse, urllib.request
u = "http://%s/api/v1/query?%s" % (sys.argv[1], urllib.parse.urlencode({"query": sys.argv[2]}))
try:
    d = json.load(urllib.request.urlopen(u, timeout=10))
except Exception:
    sys.exit(0)
r = d.get("data", {}).get("result", [])
if d.get("status") == "success" and r:
    print(r[0]["value"][1])
EOF
}
# until_true SECONDS PYTHON-EXPR-OF-v EXPR: polls EXPR until the condition holds
until_true() {
	t=$1 cond=$2 expr=$3 i=0
	while [ $i -lt $((t * 2)) ]; do
		v=$(query "$expr")
		if [ -n "$v" ] && "$PY" -c "import sys, math; v = float(sys.argv[1]); sys.exit(0 if ($cond) else 1)" "$v"; then
			echo "$v"
			return 0
		fi
		sleep 0.5
		i=$((i + 1))
	done
	echo "${v:-no sample}"
	return 1
}

start_coord --metrics 127.0.0.1:0
for s in 0 1; do
	"$bin/zshard-server" --coordinator "$addr" --data-dir "$dir/s$s" --capacity 256M \
		--metrics 127.0.0.1:0 >"$dir/s$s.log" 2>&1 &
	pids="$pids $!"
done
wait_servers 2 || fail "the servers did not register"

ctl scrape-targets >"$dir/targets.json" || fail "zshardctl scrape-targets failed"
n=$("$PY" -c 'import json, sys; print(sum(len(g["targets"]) for g in json.load(open(sys.argv[1]))))' "$dir/targets.json")
[ "$n" = 3 ] || fail "scrape-targets lists $n endpoints, not 3: $(cat "$dir/targets.json")"
"$PY" -c 'import json, sys; print(" ".join(t for g in json.load(open(sys.argv[1])) for t in g["targets"]))' \
	"$dir/targets.json" >"$dir/targets"
for t in $(cat "$dir/targets"); do
	[ "$(http GET "http://$t/metrics")" = 200 ] || fail "GET http://$t/metrics: $(cat "$dir/body")"
	promtool check metrics <"$dir/body" >"$dir/promtool.log" 2>&1 ||
		fail "promtool check metrics on $t: $(cat "$dir/promtool.log")"
	[ "$(http GET "http://$t/other")" = 404 ] || fail "http://$t/other did not answer 404"
	[ "$(http POST "http://$t/metrics")" = 405 ] || fail "a POST to http://$t/metrics did not answer 405"
done

port=$(free_port)
prom=127.0.0.1:$port
cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: zshard
    file_sd_configs:
      - files: ['$dir/targets.json']
        refresh_interval: 1s
EOF
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
	--web.listen-address="$prom" >"$dir/prometheus.log" 2>&1 &
pids="$pids $!"
v=$(until_true 60 "v == 3" 'count(up{job="zshard"} == 1)') ||
	fail "Prometheus does not see 3 targets up (got $v)"

"$bin/charlm" --print-spec --job prom --world 2 --stage 3 |
	"$PY" -c 'import json, sys; s = json.load(sys.stdin); s["checkpoint_every"] = 100; print(json.dumps(s))' \
	>"$dir/prom.json" # (checkpoints: their age's gauge)
ctl job create "$dir/prom.json" >/dev/null || fail "cannot create the job"
"$bin/charlm" --coordinator "$addr" --job prom --rank 1 --steps "$STEPS" --transport tcp \
	--print-every 0 >"$dir/rank1.log" 2>&1 &
r1=$!
pids="$pids $r1"
"$bin/charlm" --coordinator "$addr" --job prom --rank 0 --steps "$STEPS" --transport shm \
	--print-every 0 >"$dir/rank0.log" 2>&1 &
r0=$!
pids="$pids $r0"

v=$(until_true 120 "v > 0" 'sum(rate(zshard_server_data_bytes_total{op="push"}[15s]))') ||
	fail "no push rate while the job trains (got $v)"
echo "prometheus: pushed $v bytes/s (rate over 15 s, both servers)"
v=$(until_true 60 "v > 0 and not math.isinf(v)" \
	'histogram_quantile(0.9, sum by (le) (rate(zshard_server_data_op_duration_seconds_bucket{op="gather"}[15s])))') ||
	fail "no finite p90 gather latency (got $v)"
echo "prometheus: p90 gather latency $v s"
wait $r0 || fail "rank 0 did not train"
wait $r1 || fail "rank 1 did not train"
last=$((STEPS - 1))
v=$(until_true 30 "v == $last" 'max(zshard_coordinator_job_step{zshard_job="prom"})') ||
	fail "the coordinator's job step is $v, not $last"
v=$(until_true 30 "v == 2" "count(zshard_server_job_step{zshard_job=\"prom\"} == $last)") ||
	fail "$v servers, not 2, say they applied step $last"
v=$(until_true 30 "v > 0" 'sum(zshard_coordinator_rpcs_total{method="ReportStep",code="ok"})') ||
	fail "no ReportStep counted (got $v)"
v=$(until_true 30 "v > 0" 'sum(process_resident_memory_bytes)') || fail "no resident memory (got $v)"

# the operators' dashboard and alerts: every expression evaluates in this
# Prometheus, and every metric it names is in a scrape of these daemons
# (zshard_tls_certificate_expiry_timestamp_seconds needs TLS: tls.sh checks
# it); the rules pass promtool's check and their unit tests
v=$(until_true 30 "v > 0" 'count(zshard_coordinator_job_checkpoint_timestamp_seconds{zshard_job="prom"})') ||
	fail "no checkpoint timestamp for the job (got $v)"
: >"$dir/scraped"
for t in $(cat "$dir/targets"); do
	http GET "http://$t/metrics" >/dev/null && grep -v '^#' "$dir/body" >>"$dir/scraped"
done
root=$(cd "$(dirname "$0")/../.." && pwd)
"$PY" - "$prom" "$root/deploy/grafana/zshard.json" "$root/deploy/prometheus/zshard-alerts.yml" \
	"$dir/scraped" <<'EOF' >"$dir/exprs.log" 2>&1 || fail "the dashboard's and alerts' expressions: $(cat "$dir/exprs.log")"
import json, re, sys, urllib.parse, urllib.request
prom, dash, rules, scraped = sys.argv[1:5]
names = set()
for line in open(scraped):
    m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", line)
    if m:
        n = m.group(1)
        names.add(n)
        names.add(re.sub(r"_(bucket|sum|count)$", "", n))
exprs = []
def walk(o, where):
    if isinstance(o, dict):
        if isinstance(o.get("expr"), str):
            exprs.append((where + " " + o.get("refId", ""), o["expr"]))
        for k, v in o.items():
            walk(v, "panel '%s'" % o["title"] if k == "targets" and "title" in o else where)
    elif isinstance(o, list):
        for v in o:
            walk(v, where)
walk(json.load(open(dash)), "dashboard")
alert = None
for line in open(rules):
    m = re.match(r"\s*- alert: (\S+)", line)
    alert = m.group(1) if m else alert
    m = re.match(r"\s*expr: (.*)$", line)
    if m:
        exprs.append(("alert " + alert, m.group(1)))
exprs = list(dict.fromkeys(exprs))
assert len(exprs) >= 20, "only %d expressions found" % len(exprs)
known_elsewhere = {"zshard_tls_certificate_expiry_timestamp_seconds"}  # tls.sh scrapes it
bad = []
for where, e in exprs:
    q = e.replace("$__rate_interval", "1m").replace('"$job"', '".*"')
    bare = re.sub(r"\{[^}]*\}", "", q)  # label matchers, then label lists
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
    for n in set(re.findall(r"\b((?:zshard|process)_[a-z0-9_]+)", bare)):
        if n not in names and n not in known_elsewhere:
            bad.append("%s names %s, which no daemon here exports" % (where, n))
    u = "http://%s/api/v1/query?%s" % (prom, urllib.parse.urlencode({"query": q}))
    try:
        d = json.load(urllib.request.urlopen(u, timeout=10))
    except Exception as x:  # a 400 answers a bad expression
        d = {"status": "error", "error": str(x)}
    if d.get("status") != "success":
        bad.append("%s: %s does not evaluate: %s" % (where, q, d.get("error")))
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("%d expressions evaluate, every metric they name scraped" % len(exprs))
EOF
echo "prometheus: dashboard and alerts: $(tail -1 "$dir/exprs.log")"
(cd "$root/deploy/prometheus" && promtool check rules zshard-alerts.yml &&
	promtool test rules zshard-alerts.test.yml) >"$dir/rules.log" 2>&1 ||
	fail "the alerting rules: $(cat "$dir/rules.log")"
echo "prometheus: the alerting rules pass promtool check rules and their unit tests"
echo "prometheus: passed (3 targets; rate, histogram quantile, steps, RPCs, RSS through Prometheus's API; the dashboard's and alerts' expressions)"
