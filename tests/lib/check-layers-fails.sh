#!/bin/sh
# check-layers-fails.sh - the layer check itself must be able to fail: on a
# copy of the tree with one bad include planted at a time (a lower layer
# including a higher one, an include without its folder, LMDB outside
# storage/), tools/check-layers.sh must exit non-zero and name the file.
# Leaves nothing.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "layers-fails: $*"; exit 1; }

for d in base model math gpu storage net ctrl metrics rdma client engine server coord cli include; do
	cp -r "$d" "$tmp/$d"
done
sh tools/check-layers.sh "$tmp" > "$tmp/out" || fail "the clean copy fails: $(cat "$tmp/out")"

plant() { # file line: the check must fail and name file
	cp "$tmp/$1" "$tmp/$1.orig"
	printf '%s\n' "$2" >> "$tmp/$1"
	if sh tools/check-layers.sh "$tmp" > "$tmp/out" 2>&1; then
		fail "'$2' in $1 was not caught"
	fi
	grep -q "$1" "$tmp/out" || fail "'$2' in $1: the message does not name the file: $(cat "$tmp/out")"
	mv "$tmp/$1.orig" "$tmp/$1"
}
plant net/wire.c '#include "engine/engine.h"'
plant engine/step.c '#include "server/daemon.h"'
plant storage/ckpt.c '#include "net/wire.h"'
plant base/util.c '#include "model/model.h"'
plant client/zshard.c '#include "engine/engine.h"'
plant model/model.c '#include "status.h"'
plant coord/jobs.c '#include <lmdb.h>'
echo "layers-fails: the check catches a higher layer, a sibling, a bare include and a foreign header"
