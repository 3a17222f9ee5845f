#!/bin/sh
# check.sh - the deploy files, checked offline:
#   deploy/systemd/     systemd-analyze verify (the units as installed, with
#                       ExecStart pointing at BIN_DIR), no warning allowed;
#   deploy/kubernetes/  every resource against the Kubernetes 1.30 schemas,
#                       strictly (kubernetes-validate from PyPI, in a venv
#                       under BUILD_DIR, installed once);
#   deploy/slurm/       shellcheck, and a dry run on a fake two-node
#                       allocation that must place the coordinator on the
#                       first node, 8 servers a node, the job and 16 trainers.
#
#   tests/deploy/check.sh BIN_DIR BUILD_DIR
#
# A part whose tool is missing (no systemd, no PyPI) is skipped with the
# reason; a part that runs and finds a problem fails.
set -u
bin=$(cd "$1" && pwd) build=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
dir=$(mktemp -d /tmp/zshard-deploy-XXXXXX)
trap 'rm -rf "$dir"' EXIT
rc=0 said=""
fail() { echo "deploy: FAILED: $*"; rc=1; }

# systemd
if command -v systemd-analyze >/dev/null 2>&1; then
	for f in "$root"/deploy/systemd/*.service; do
		sed "s|/usr/local/bin/|$bin/|" "$f" >"$dir/$(basename "$f")"
	done
	if (cd "$dir" && systemd-analyze verify zshard-coordinator.service zshard-server@0.service) \
		>"$dir/systemd.log" 2>&1 && [ ! -s "$dir/systemd.log" ]; then
		said="$said systemd units verified;"
	else
		fail "systemd-analyze verify: $(cat "$dir/systemd.log")"
	fi
	# and with the TLS drop-in (LoadCredential=) beside each
	mkdir -p "$dir/zshard-coordinator.service.d" "$dir/zshard-server@.service.d"
	cp "$root/deploy/systemd/tls.conf" "$dir/zshard-coordinator.service.d/"
	cp "$root/deploy/systemd/tls.conf" "$dir/zshard-server@.service.d/"
	if (cd "$dir" && systemd-analyze verify zshard-coordinator.service zshard-server@0.service) \
		>"$dir/systemd-tls.log" 2>&1 && [ ! -s "$dir/systemd-tls.log" ]; then
		said="$said with the TLS drop-in too;"
	else
		fail "systemd-analyze verify with tls.conf: $(cat "$dir/systemd-tls.log")"
	fi
else
	said="$said systemd skipped (no systemd-analyze);"
fi

# every default port distinct, per daemon kind and instance: the
# coordinator's unit and env example, server instances 0-9 (%i expanded)
{
	sed -n 's/^Environment=ZSHARD_LISTEN=.*:\([0-9]*\)$/\1/p' "$root/deploy/systemd/zshard-coordinator.service"
	grep -o -- '--metrics [^ ]*' "$root/deploy/systemd/coordinator.env.example" | sed 's/.*://'
	for i in 0 1 2 3 4 5 6 7 8 9; do
		sed -n 's/^Environment=ZSHARD_[A-Z_]*=[^ ]*:\([0-9%i]*\)$/\1/p' \
			"$root/deploy/systemd/zshard-server@.service" | sed "s/%i/$i/"
	done
} >"$dir/ports"
n=$(wc -l <"$dir/ports")
dup=$(sort "$dir/ports" | uniq -d | tr '\n' ' ')
if [ "$n" -ne 32 ]; then
	fail "systemd ports: expected 2 of the coordinator and 3 of each of 10 server instances, found $n: $(tr '\n' ' ' <"$dir/ports")"
elif [ -n "$dup" ]; then
	fail "systemd ports shared by two daemons: $dup"
else
	said="$said systemd: 32 default ports distinct (coordinator, 10 server instances);"
fi
# the files agree with each other and the guide: TLS by the drop-in alone
# (an env example's ZSHARD_TLS_* would point DynamicUser at files it cannot
# read), metrics on loopback by default
if grep -q '^ZSHARD_TLS_\|^#ZSHARD_TLS_' "$root"/deploy/systemd/*.env.example; then
	fail "an env example sets ZSHARD_TLS_*: TLS is the drop-in's (tls.conf, LoadCredential=)"
elif ! grep -q 'LoadCredential' "$root/docs/operations.md"; then
	fail "the operations guide does not give the units' TLS method (tls.conf, LoadCredential=)"
elif grep -q -- '--metrics 0\.0\.0\.0\|ZSHARD_METRICS=0\.0\.0\.0' "$root"/deploy/systemd/*; then
	fail "a unit or env example binds metrics to every address by default"
else
	said="$said systemd: TLS by the drop-in alone, metrics on loopback;"
fi

# kubernetes
venv=$build/deploy-venv
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
	"$PY" -m venv "$venv" >/dev/null 2>&1 &&
		timeout 300 "$venv/bin/pip" install -q kubernetes-validate >"$dir/pip.log" 2>&1 ||
		rm -rf "$venv"
fi
if [ -x "$venv/bin/kubernetes-validate" ]; then
	if "$venv/bin/kubernetes-validate" --strict -k 1.30.0 "$root"/deploy/kubernetes/*.yaml \
		>"$dir/k8s.log" 2>&1; then
		said="$said kubernetes: $(grep -c passed "$dir/k8s.log") resources valid (1.30, strict);"
	else
		fail "kubernetes-validate: $(grep -v passed "$dir/k8s.log")"
	fi
else
	said="$said kubernetes skipped (kubernetes-validate could not be installed from PyPI: $(tail -1 "$dir/pip.log" 2>/dev/null));"
fi

# slurm
s=$root/deploy/slurm/zshard.sbatch
if command -v shellcheck >/dev/null 2>&1; then
	shellcheck -x "$s" >"$dir/sc.log" 2>&1 || fail "shellcheck: $(cat "$dir/sc.log")"
else
	said="$said shellcheck skipped (not installed);"
fi
mkdir -p "$dir/stub"
printf '#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "node1\\nnode2\\n"\n' >"$dir/stub/scontrol"
chmod +x "$dir/stub/scontrol"
if PATH="$dir/stub:$PATH" SLURM_JOB_ID=42 SLURM_JOB_NODELIST='node[1-2]' SLURM_NTASKS_PER_NODE=8 \
	SLURM_SUBMIT_DIR=/submit \
	ZSHARD_SPEC="$root/examples/charlm.json" TRAIN_CMD="python3 train.py" ZSHARD_DRY_RUN=1 \
	ZSHARD_BIN=/opt/zshard/bin bash "$s" >"$dir/dry.log" 2>&1; then
	# one line per command (the task scripts span lines)
	awk '/^\+ / && NR > 1 { print "" } { printf "%s ", $0 } END { print "" }' "$dir/dry.log" |
		tr -s '\t' ' ' >"$dir/dry.one"
	mv "$dir/dry.one" "$dir/dry.log"
	grep -q "srun --nodes=1 --ntasks=1 --nodelist=node1 .*zshard-coordinator --listen 0.0.0.0:7400 --advertise node1" "$dir/dry.log" &&
		grep -q "srun --nodes=2 --ntasks-per-node=8 .*zshard-server node1:7400 48G /submit/zshard-state/42" "$dir/dry.log" &&
		grep -q "zshardctl --coordinator node1:7400 job create .*charlm.json" "$dir/dry.log" &&
		grep -q "srun --nodes=2 --ntasks-per-node=8 --kill-on-bad-exit=1 bash -c .*python3 train.py" "$dir/dry.log" &&
		grep -q "job stop charlm" "$dir/dry.log" ||
		fail "the sbatch dry run did not place everything: $(cat "$dir/dry.log")"
	[ $rc -eq 0 ] && said="$said slurm: shellcheck clean, a dry run on 2 nodes x 8 GPUs placed 1 coordinator, 16 servers, 16 trainers;"
else
	fail "the sbatch dry run failed: $(cat "$dir/dry.log")"
fi
echo "deploy:$said"
exit $rc
