#!/bin/sh
# wheel.sh BUILD TORCH_VENV - zshard as a pip user gets it: the wheel built
# by `make wheel` alone in a fresh copy of the checkout (what git clone
# gives: the tracked files and the untracked ones git does not ignore, no
# build/ of any earlier make; tools/wheel.sh: make's own build, auditwheel
# repair), installed into a fresh venv in a fresh folder, and used from
# there with nothing of the
# repository's: no ZSHARD_* variables, no PYTHONPATH, no LD_LIBRARY_PATH,
# an empty environment but PATH and a fresh HOME. The installed
# zshard-local starts a local cluster in its default folder; torchrun runs
# two ranks of the quick start (wheel_train.py, copied there), which find
# that cluster by themselves and train within 4e-4 of single-process torch;
# the installed zshardctl shows the job and exports its parameters, which
# equal the ranks' state_dict; python -m zshard.launch stops the cluster.
# torch (gigabytes) is borrowed from TORCH_VENV through a .pth file after
# the fresh venv's own site-packages; everything of zshard's is the wheel's.
set -eu
build=$1
tvenv=$(cd "$2" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
d=$(mktemp -d /tmp/zshard-wheel-XXXXXX)
clean() {
	[ -x "$d/venv/bin/zshard-local" ] &&
		env -i HOME="$d/home" PATH=/usr/bin:/bin "$d/venv/bin/zshard-local" stop >/dev/null 2>&1
	rm -rf "$d"
}
trap clean EXIT
trap 'exit 1' INT TERM
mkdir -p "$d/home" "$d/work" "$d/src"
# the fresh clone: nothing built, so a target make wheel does not build is
# missing here (it once copied build/lib/libzshard.so.0, which only make
# all made)
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$root" && git ls-files -co --exclude-standard | while IFS= read -r f; do
		[ -e "$f" ] && printf '%s\n' "$f"; done | tar -cf - -T -) | tar -xf - -C "$d/src"
else
	(cd "$root" && tar -cf - --exclude=./build --exclude='./build-*' .) | tar -xf - -C "$d/src"
fi
t0=$(date +%s)
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$d/src" --no-print-directory wheel \
	>"$build/wheel-clone.log" 2>&1; then
	tail -40 "$build/wheel-clone.log"
	echo "wheel: FAILED: make wheel in a fresh clone ($d/src; the log: $build/wheel-clone.log)"
	exit 1
fi
whl=$(tail -1 "$build/wheel-clone.log")
[ -f "$whl" ] || { tail -20 "$build/wheel-clone.log"; echo "wheel: FAILED: no wheel built" >&2; exit 1; }
echo "wheel: make wheel alone in a fresh clone built it in $(($(date +%s) - t0)) s"
echo "wheel: $(basename "$whl") ($(du -k "$whl" | cut -f1) KiB), into a fresh venv in $d"
/usr/bin/python3 -m venv "$d/venv"
"$d/venv/bin/pip" install -q --disable-pip-version-check --retries 10 --timeout 60 "$whl"
purelib='import sysconfig; print(sysconfig.get_paths()["purelib"])'
"$tvenv/bin/python" -c "$purelib" >"$("$d/venv/bin/python" -c "$purelib")/zz-borrowed-torch.pth"
cp "$root/tests/python/wheel_train.py" "$d/work/train.py"
cd "$d/work"
run() { env -i HOME="$d/home" PATH="$d/venv/bin:/usr/bin:/bin" OMP_NUM_THREADS=1 "$@"; }
run env ROOT="$root" python - <<'PY'
import os, sys, zshard, zshard._lib as l
here = os.path.realpath(zshard.__file__)
assert here.startswith(os.path.realpath(sys.prefix)), "zshard is not the wheel's: " + here
assert l.lib._name.startswith(os.path.dirname(here)), "libzshard is not the wheel's: " + l.lib._name
want = open(os.path.join(os.environ["ROOT"], "VERSION")).read().strip()
assert zshard.__version__ == want, "the wheel says %s, VERSION %s" % (zshard.__version__, want)
print("wheel: zshard %s and libzshard from %s" % (zshard.__version__, os.path.dirname(here)))
PY
# every shared library the installed programs and libzshard need is the
# wheel's own (zshard.libs) or one of the manylinux set every glibc system has
site=$("$d/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
n=0
for f in "$site"/zshard/_native/libzshard.so.0 "$site"/zshard/_native/bin/*; do
	[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
	n=$((n + 1))
	outside=$(ldd "$f" | awk '$3 ~ /^\// {print $3}' | grep -v "/zshard.libs/" |
		grep -vE '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libz|ld-linux-x86-64)\.so' || true)
	if [ -n "$outside" ]; then
		echo "wheel: FAILED: $(basename "$f") needs libraries from outside the wheel: $outside"
		exit 1
	fi
done
[ "$n" -eq 4 ] || { echo "wheel: FAILED: $n ELF files checked, want 4"; exit 1; }
echo "wheel: libzshard and the daemons need nothing beyond the wheel and glibc's set"
# nothing of rdma-core's is needed (libibverbs is loaded where present)
if python3 -m zipfile -l "$whl" | grep -q ibverbs; then
	echo "wheel: FAILED: the wheel bundles libibverbs"; exit 1
fi
# before a local cluster runs, clients say where they looked
if run python -c 'import zshard; zshard.create_job("{}")' >"$d/none.log" 2>&1 ||
	! grep -q "zshard-local start; none runs in $d/home/.local/state/zshard/local" "$d/none.log"; then
	cat "$d/none.log"; echo "wheel: FAILED: no message naming the local cluster's folder"; exit 1
fi
addr=$(run zshard-local start --servers 2 2>"$d/local.log") ||
	{ cat "$d/local.log"; echo "wheel: zshard-local start FAILED"; exit 1; }
echo "wheel: zshard-local start: coordinator $addr, 2 servers, in $d/home/.local/state/zshard/local"
if ! run python -m torch.distributed.run --standalone --nproc-per-node 2 train.py "$d/sd.pt" \
	>"$d/train.log" 2>&1; then
	cat "$d/train.log"
	for f in "$d"/home/.local/state/zshard/local/logs/*.log; do echo "== $f"; tail -20 "$f"; done
	echo "wheel: torchrun FAILED"
	exit 1
fi
grep '^wheel_train:' "$d/train.log"
# the quick start run again: refused on every rank, naming the step and the
# choices (it once went on from step 12, the new model's seed ignored)
if run python -m torch.distributed.run --standalone --nproc-per-node 2 train.py "$d/sd2.pt" \
	>"$d/again.log" 2>&1; then
	cat "$d/again.log"; echo "wheel: FAILED: the quick start run again went on silently"; exit 1
fi
grep -q "job 'quickstart' has state: it trained to step 12 in an earlier run.*resume=True" \
	"$d/again.log" || { cat "$d/again.log"; echo "wheel: FAILED: no refusal naming the step"; exit 1; }
echo "wheel: the quick start run again is refused, naming step 12 and resume=True / 'fresh'"
run zshardctl placement quickstart | head -3
run zshardctl export quickstart --bare-names --out "$d/export.safetensors" >/dev/null
run python - "$d/sd.pt" "$d/export.safetensors" <<'PY'
import sys, torch
from safetensors.torch import load_file
sd, ex = torch.load(sys.argv[1]), load_file(sys.argv[2])
assert sorted(sd) == sorted(ex), (sorted(sd), sorted(ex))
for n in sd:
    assert torch.equal(sd[n], ex[n].to(sd[n].dtype)), n
print("wheel: zshardctl export equals the ranks' state_dict (%d tensors)" % len(sd))
PY
run python -m zshard.launch stop
echo "check: wheel: built, installed in a fresh venv, local cluster, torchrun 2 ranks: passed"
