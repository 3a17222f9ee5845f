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

allowed() { # folder -> its allowed list, or "?" when the folder is unknown
	echo "$LAYERS" | awk -v d="$1" -F': *' '$1 == d { print $2 " " d; found = 1 }
		END { if (!found) print "?" }'
}

TMPF=$(mktemp)
trap 'rm -f "$TMPF"' EXIT
for dir in $(echo "$LAYERS" | awk -F: 'NF { print $1 }'); do
	[ -d "$ROOT/$dir" ] || continue
	ok=$(allowed "$dir")
	for f in $(find "$ROOT/$dir" -name '*.[ch]' | sort); do
		rel=${f#"$ROOT"/}
		grep -n '^[[:space:]]*#[[:space:]]*include' "$f" | while IFS= read -r line; do
			n=${line%%:*}
			inc=$(echo "$line" | sed -n 's/.*#[[:space:]]*include[[:space:]]*\([<"]\)\([^>"]*\)[>"].*/\1\2/p')
			kind=$(echo "$inc" | cut -c1)
			path=$(echo "$inc" | cut -c2-)
			if [ "$kind" = '<' ]; then
				echo "$FOREIGN" | while read -r pat dirs; do
					[ -n "$pat" ] || continue
					case "$path" in "$pat"*)
						case " $dirs " in *" $dir "*) ;; *)
							echo "layers: $rel:$n includes <$path>, which only $dirs may include"
							echo x >> "$TMPF";;
						esac;;
					esac
				done
				continue
			fi
			case "$path" in
			*/*) top=${path%%/*} ;;
			*)
				# the public headers include each other by bare name
				if [ "$dir" = include ]; then continue; fi
				echo "layers: $rel:$n includes \"$path\" without its folder (write \"FOLDER/$path\")"
				echo x >> "$TMPF"
				continue ;;
			esac
			case " $ok " in *" $top "*) ;; *)
				echo "layers: $rel:$n: $dir/ includes \"$path\"; $dir/ may include only: $ok"
				echo x >> "$TMPF";;
			esac
		done
	done
done
n=$(wc -l < "$TMPF")
if [ "$n" -ne 0 ]; then
	echo "layers: $n include(s) break the layering (tools/check-layers.sh lists what each folder may include)"
	exit 1
fi
echo "layers: every include of $(echo "$LAYERS" | awk -F: 'NF { printf "%s/ ", $1 }')keeps to its layer"
