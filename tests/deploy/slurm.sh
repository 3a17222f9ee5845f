#!/bin/sh
# slurm.sh - deploy/slurm/zshard.sbatch run by Slurm itself: a one-node
# cluster on this machine (munged, slurmctld and slurmd from Debian's
# packages, installed when missing, each on its own socket, ports and
# folders under a temporary directory), the batch file submitted with
# sbatch --wait as a user would. Three runs of one job:
#
#   1. it trains 2 ranks for 30 steps and exits 0; the servers keep their
#      live state and the coordinator stops cleanly; no process is left
#   2. resubmitted with 80 steps and the same state (the job id differs:
#      ZSHARD_STATE names the first one's), its ranks resume at step 30;
#      Slurm tells the batch shell to stop (scancel --batch --signal=TERM,
#      what --signal=B:TERM@180 sends before the time limit) mid-run: the
#      ranks leave cleanly, the servers save, the coordinator stops, all
#      before the script ends
#   3. scontrol requeue of run 2 (its own state folder): the ranks resume at
#      the step run 2 stopped at and finish; the parameters equal the
#      single-process reference's after 80 steps, bit for bit
#
#   tests/deploy/slurm.sh BIN_DIR
#
# Leaves no process, daemon or directory behind.
set -u
name=slurm bin=$1
case $bin in /*) ;; *) bin=$(cd "$bin" && pwd) ;; esac
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/../integration/common.sh"

need() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
if ! need slurmctld || ! need slurmd || ! need sbatch || ! need munged; then
	[ "$(id -u)" = 0 ] || skip "Slurm is not installed and installing it needs root (apt-get install slurmctld slurmd slurm-client munge)"
	echo "slurm: installing slurmctld slurmd slurm-client munge from Debian"
	apt-get update -qq >/dev/null 2>&1
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 \
		--no-install-recommends slurmctld slurmd slurm-client munge >/dev/null ||
		fail "apt-get could not install Slurm"
fi
PATH=$PATH:/usr/sbin
[ "$(id -u)" = 0 ] || skip "a test cluster's slurmd runs jobs as their user only as root"
host=$(hostname -s)
getent hosts "$host" >/dev/null || skip "this machine's name '$host' does not resolve (the batch file advertises node names)"

zs_begin slurm
chmod 755 "$dir"
sl=$dir/slurm
mkdir -p "$sl/munge" "$sl/state" "$sl/spool" "$sl/log" "$dir/submit"
chmod 700 "$sl/munge"
# the daemons end with the test: slurmd (and the steps' slurmstepd), then
# slurmctld, then munged; the steps' processes are killed by their name
zs_cleanup_more() {
	for f in slurmd slurmctld munged; do
		p=$(cat "$sl/$f.pid" 2>/dev/null) && kill "$p" 2>/dev/null
	done
	for f in slurmd slurmctld munged; do
		p=$(cat "$sl/$f.pid" 2>/dev/null) || continue
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		kill -9 "$p" 2>/dev/null
	done
	pkill -9 -f "slurmstepd.*$dir" 2>/dev/null
	pkill -9 -f "$dir/" 2>/dev/null
}
dd if=/dev/urandom of="$sl/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$sl/munge.key"
sock=$sl/munge/munge.sock
munged -f --socket="$sock" --key-file="$sl/munge.key" --log-file="$sl/log/munged.log" \
	--pid-file="$sl/munged.pid" --seed-file="$sl/munge/seed" ||
	fail "munged did not start: $(tail -n 3 "$sl/log/munged.log" 2>/dev/null)"

ctld_port=$(free_port)
slurmd_port=$(free_port)
cpus=$(nproc)
cat >"$sl/slurm.conf" <<EOF
ClusterName=zshardtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$sl/state
SlurmdSpoolDir=$sl/spool
SlurmctldPidFile=$sl/slurmctld.pid
SlurmdPidFile=$sl/slurmd.pid
SlurmctldLogFile=$sl/log/slurmctld.log
SlurmdLogFile=$sl/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
KillWait=60
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$sl/slurm.conf
slurmctld -i -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" -N "$host" || fail "slurmd did not start"
idle() { sinfo -h -N -o '%T' 2>/dev/null | grep -q '^idle'; }
wait_until 60 idle || fail "the node did not become idle within 60 s: $(sinfo -N 2>&1 | tail -n 2)"

# the job: the example model, 2 ranks; the trainers' command reads the
# step count from the run's environment (STEPS); the learning rate's
# schedule spans 80 steps in every run
"$bin/charlm" --print-spec --job sl --world 2 --stage 3 >"$dir/sl.json" || fail "no spec"
cat >"$dir/train.sh" <<EOF
#!/bin/sh
exec "$bin/charlm" --coordinator "\$ZSHARD_COORDINATOR" --job "\$ZSHARD_JOB" --rank "\$RANK" \
	--steps "\$STEPS" --total 80 --transport tcp --lag-ms "\${LAG_MS:-0}" --print-every 10 --dump "$dir/rank\$RANK.bin"
EOF
chmod +x "$dir/train.sh"
port=$(free_port)
# submit OUT [ENV=VALUE...]: sbatch --wait of the batch file as a user would
# (resources for 2 tasks of one CPU, no GPU), from $dir/submit; its exit
# status; the job's output in $dir/OUT.log
submit() {
	out=$1
	shift
	(cd "$dir/submit" && env ZSHARD_SPEC="$dir/sl.json" TRAIN_CMD="$dir/train.sh" \
		ZSHARD_BIN="$bin" ZSHARD_PORT="$port" ZSHARD_CAPACITY=256M \
		ZSHARD_SERVER_OPTS="--rdma off" ZSHARD_STOP_S=60 "$@" \
		sbatch --wait --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
		--gpus-per-node=0 --time=10 --output="$dir/$out.log" \
		"$root/deploy/slurm/zshard.sbatch" >"$dir/$out.id")
}
left() { # this test's daemons or trainers still running
	pgrep -f "$dir/(state|submit|train)" >/dev/null 2>&1 ||
		pgrep -f "zshard-(server|coordinator).*$dir" >/dev/null 2>&1
}
clean_end() { # OUT: what a clean end of a run prints; no process left
	grep -q "live state at step $2 kept" "$dir/$1.log" ||
		fail "$1: the servers did not keep the live state at step $2"
	grep -q "coordinator: stopped" "$dir/$1.log" || fail "$1: the coordinator did not stop cleanly"
	grep -q "did not end within" "$dir/$1.log" && fail "$1: a daemon outlasted its stop"
	wait_until 30 sh -c '! pgrep -f "$1" >/dev/null' - "zshard-(server|coordinator).*$dir" ||
		fail "$1: a daemon outlived the job: $(pgrep -af "$dir" | head -n 3)"
}

# 1. 30 steps, exit 0, the daemons stopped after saving
submit run1 STEPS=30 || fail "run 1: sbatch says the job failed (exit $?)"
grep -q "rank 0: 30 steps" "$dir/run1.log" || fail "run 1 did not train 30 steps"
clean_end run1 30
state1=$dir/submit/zshard-state/$(cat "$dir/run1.id")
[ -d "$state1/server-0" ] && [ -d "$state1/server-1" ] && [ -d "$state1/coordinator" ] ||
	fail "run 1 kept no state under the submit folder's zshard-state/JOB_ID"

# 2. resumed from run 1's state, told to stop by Slurm mid-run
: >"$dir/run2.log"
submit run2 STEPS=80 LAG_MS=200 ZSHARD_STATE="$state1" &
sub=$!
pids="$pids $sub"
past() { # run 2's rank 0 printed step 40 or later
	grep -Eq "^rank 0 step +[4-7][0-9] " "$dir/run2.log"
}
wait_until 120 past || fail "run 2 did not reach step 40: $(tail -n 3 "$dir/run2.log")"
id2=$(cat "$dir/run2.id")
scancel --batch --signal=TERM "$id2" || fail "scancel of the batch shell failed"
wait "$sub"
rc=$?
[ $rc -ne 0 ] || fail "run 2 was stopped but sbatch says it completed"
grep -q "rank 0 resumes at step 30" "$dir/run2.log" || fail "run 2 did not resume at step 30"
grep -q "told to stop" "$dir/run2.log" || fail "run 2's batch shell did not see the TERM"
stopped=$(sed -n "s/.*every rank left before step \([0-9]*\).*/\1/p" "$dir/run2.log" | tail -n 1)
[ -n "$stopped" ] && [ "$stopped" -ge 40 ] && [ "$stopped" -lt 80 ] ||
	fail "run 2's ranks did not leave cleanly mid-run (step '${stopped:-none}')"
clean_end run2 "$stopped"

# 3. the same job requeued: resumes at that step, ends bitwise the reference
: >"$dir/run3.log"
scontrol requeue "$id2" || fail "scontrol requeue $id2 failed"
requeued() { squeue -h -j "$id2" -o '%T' 2>/dev/null | grep -q .; }
wait_until 60 requeued || fail "the requeued job did not return to the queue"
# (Slurm holds a requeued job back until a begin time 2 minutes on; the
# test does not wait for it)
scontrol update JobId="$id2" StartTime=now >/dev/null 2>&1
wait_until 240 sh -c '! squeue -h -j "$1" -o %T 2>/dev/null | grep -q .' - "$id2" ||
	fail "the requeued job did not end within 240 s: $(tail -n 5 "$dir/run2.log")"
# a requeued job's output replaces run 2's in run2.log
grep -q "rank 0 resumes at step $stopped" "$dir/run2.log" ||
	fail "the requeued job did not resume at step $stopped: $(grep resumes "$dir/run2.log")"
grep -q "rank 0: .* steps" "$dir/run2.log" || fail "the requeued job did not finish"
clean_end run2 80
"$bin/charlm" --reference --spec "$dir/sl.json" --world 2 --steps 80 --dump "$dir/ref.bin" \
	>"$dir/ref.log" 2>&1 || fail "the reference did not run"
cmp -s "$dir/rank0.bin" "$dir/ref.bin" || fail "after a resume, a stop and a requeue the parameters differ from the reference"
left && fail "a process outlived the jobs: $(pgrep -af "$dir" | head -n 3)"
echo "slurm: passed (sbatch of deploy/slurm/zshard.sbatch on a one-node Slurm: trained and ended cleanly; resumed from its state on a new allocation; told to stop by Slurm at step $stopped, the ranks left and the daemons saved before the script ended; requeued, it resumed there and ended bitwise the reference after 80 steps; no process left)"
