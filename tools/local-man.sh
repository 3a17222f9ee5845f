#!/bin/sh
# local-man.sh SCRIPT - zshard-local's manual page (roff) from the header
# comment its --help prints: its first line the name, its indented usage
# lines the synopsis, the rest the description, so that the page and
# --help are one text.
set -eu
script=$1
version=$(cat "$(dirname "$0")/../VERSION")
header() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$script"; }
roff() { sed -e 's/\\/\\\\/g' -e 's/-/\\-/g' -e "s/^[.']/\\\\\\&&/"; }
printf '.TH ZSHARD-LOCAL 1 "" "zshard %s" "zshard manual"\n.SH NAME\n' "$version"
header | awk 'NR == 1 { sub(/:$/, ""); print; exit }' | roff
printf '.SH SYNOPSIS\n.nf\n'
header | awk '/^  / { sub(/^  /, ""); print }' | roff
printf '.fi\n.SH DESCRIPTION\n'
header | awk 'NR == 1 || /^  / { next } NR == 2 { $0 = "zshard-local runs " $0 } { print }' | roff |
	awk '/^$/ { if (!blank && seen) print ".PP"; blank = 1; next } { blank = 0; seen = 1; print }'
cat <<'TAIL'
.SH SEE ALSO
.BR zshard\-server (1),
.BR zshard\-coordinator (1),
.BR zshardctl (1)
TAIL
