#!/bin/sh
# check-layers.sh - fails when a source file includes a layer it must not.
#
#   tools/check-layers.sh [ROOT]      (ROOT: the source tree, default .)
#
# Each top-level folder is one layer; LAYERS below lists, for each, the
# folders its files may include (besides its own). Dependencies point one
# way, down this list: a file that includes a folder not named on its line
# (a higher layer, or a sibling it has no business with) fails the check,
# and so does an include that does not name its folder ("x.h" instead of
# "net/x.h"). FOREIGN says which folders alone may include a third-party
# library's header, so that a gRPC, LMDB or verbs upgrade touches one
# folder. tests/, bench/ and examples/ sit above everything and are not
# checked. make check runs this.
set -eu
ROOT=${1:-.}

# folder: the folders it may include, lowest first
LAYERS="
include:
base: include
model: base include
math: model base include
gpu: math model base include
storage: model base include
net: model base include
ctrl: gen model base include
metrics: base include
rdma: net model base include
client: gpu ctrl rdma net model base include
engine: net gpu math model base include
server: engine metrics ctrl rdma net storage gpu math model base include
coord: metrics ctrl storage model base include
cli: ctrl rdma net storage gpu math model base include
sim: engine model base include
"
# a third-party header: the folders that may include it
FOREIGN="
grpc/ ctrl
protobuf-c/ ctrl
openssl/ ctrl net
lmdb.h storage
infiniband/ rdma
jansson.h model storage cli
microhttpd.h metrics
gnutls/ metrics
cuda_runtime.h gpu
cuda.h gpu
"

# every source file of the layers, then one awk over them all (a shell
# loop per include line took seconds a run)
TMPF=$(mktemp)
trap 'rm -f "$TMPF"' EXIT
for dir in $(echo "$LAYERS" | awk -F: 'NF { print $1 }'); do
	[ -d "$ROOT/$dir" ] || continue
	find "$ROOT/$dir" -name '*.[ch]' | sort
done > "$TMPF"
# shellcheck disable=SC2046 # the file list is meant to split (no spaces in it)
awk -v root="$ROOT" -v layers="$LAYERS" -v foreign="$FOREIGN" '
BEGIN {
	n = split(layers, L, "\n")
	for (i = 1; i <= n; i++) {
		if (L[i] !~ /:/)
			continue
		d = L[i]; sub(/:.*/, "", d)
		a = L[i]; sub(/^[^:]*:[ \t]*/, "", a)
		ok[d] = a " " d
	}
	m = split(foreign, F, "\n")
	for (i = 1; i <= m; i++) {
		k = split(F[i], w, /[ \t]+/)
		if (k < 2)
			continue
		nf++
		fpat[nf] = w[1]
		fdirs[nf] = w[2]
		for (j = 3; j <= k; j++)
			fdirs[nf] = fdirs[nf] " " w[j]
	}
}
FNR == 1 {
	rel = substr(FILENAME, length(root) + 2)
	dir = rel; sub(/\/.*/, "", dir)
}
/^[ \t]*#[ \t]*include/ {
	if (!match($0, /[<"][^>"]*[>"]/))
		next
	kind = substr($0, RSTART, 1)
	path = substr($0, RSTART + 1, RLENGTH - 2)
	if (kind == "<") {
		for (i = 1; i <= nf; i++)
			if (index(path, fpat[i]) == 1 && index(" " fdirs[i] " ", " " dir " ") == 0) {
				print "layers: " rel ":" FNR " includes <" path ">, which only " fdirs[i] " may include"
				bad++
			}
		next
	}
	if (path !~ /\//) {
		# the public headers include each other by bare name
		if (dir != "include") {
			print "layers: " rel ":" FNR " includes \"" path "\" without its folder (write \"FOLDER/" path "\")"
			bad++
		}
		next
	}
	top = path; sub(/\/.*/, "", top)
	if (index(" " ok[dir] " ", " " top " ") == 0) {
		print "layers: " rel ":" FNR ": " dir "/ includes \"" path "\"; " dir "/ may include only: " ok[dir]
		bad++
	}
}
END {
	if (bad) {
		print "layers: " bad " include(s) break the layering (tools/check-layers.sh lists what each folder may include)"
		exit 1
	}
}' $(cat "$TMPF")
echo "layers: every include of $(echo "$LAYERS" | awk -F: 'NF { printf "%s/ ", $1 }')keeps to its layer"
