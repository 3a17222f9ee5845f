#!/bin/sh
# check-man.sh BUILD - every setting has its help, its key and its page:
# each flag a daemon's --help lists has a help line and an entry in its
# manual page, and each that takes a value a launch configuration key
# (zshardctl config keys) unless it only makes sense on a command line
# (--config, --port-file); every key is in a page; each zshardctl command's
# flags are in zshardctl's page, and each job spec key (model/spec_json.c's
# lists) in its JOB SPEC; each flag zshard-local takes is in its --help and
# its page. The pages are made from the same tables (zshardctl man), so
# this fails where a table entry lacks a help or a key, or a page its text.
#
#   tests/lib/check-man.sh build
set -u
build=$1
bin=$build/bin
man=$build/man
root=$(cd "$(dirname "$0")/../.." && pwd)
bad=0
fails=$(mktemp)
trap 'rm -f "$fails"' EXIT
# (the loops below run in pipelines' subshells: what fails is kept in a file)
no() { echo "man: $*" | tee -a "$fails"; bad=1; }
for f in zshard-server zshard-coordinator zshardctl zshard-local; do
	[ -s "$man/$f.1" ] || { no "$man/$f.1 is missing"; continue; }
	man -l "$man/$f.1" >/dev/null 2>"$man/$f.err" || no "man -l $man/$f.1 fails"
	[ -s "$man/$f.err" ] && { no "man -l $man/$f.1 warns:"; cat "$man/$f.err"; }
done
[ $bad -eq 0 ] || exit 1
"$bin/zshardctl" config keys | awk '{print $1}' >"$man/keys.txt"
page_has() { grep -qF -- "$2" "$man/$1.1"; }
for d in zshard-server zshard-coordinator; do
	pre=${d#zshard-}
	# "  --flag ARG   help" (a flag whose help starts on the next line: its
	# line ends after ARG)
	"$bin/$d" --help | awk '
		function out() { if (f != "") print f, kind, (help ~ /[a-z]/ ? "help" : "nohelp") }
		/^  --/ { out(); f = substr($1, 3); kind = ($2 != "" && $2 ~ /^[A-Z]/) ? "value" : "flag";
			  help = $0; sub(/^  --[^ ]+( [A-Z][^ ]*)? */, "", help); next }
		/^                    / { if (help == "") help = $0; next }
		{ out(); f = "" }
		END { out() }' |
		while read -r flag kind help; do
			[ "$help" = help ] || no "$d --$flag has no help line"
			page_has "$d" "\\-\\-$(echo "$flag" | sed 's/-/\\-/g')" ||
				no "$d --$flag is not in its manual page"
			[ "$kind" = value ] || continue
			key=$(echo "$flag" | tr - _)
			case $flag in config | port-file) continue ;; esac
			grep -qx "$pre.$key" "$man/keys.txt" || grep -qx "$key" "$man/keys.txt" ||
				no "$d --$flag has no launch configuration key ($pre.$key)"
		done
done
while read -r key; do
	case $key in
	server.*) p=zshard-server ;;
	coordinator.*) p=zshard-coordinator ;;
	*) p=zshardctl ;;
	esac
	page_has "$p" "$key" || no "the key $key is in no page ($p)"
done <"$man/keys.txt"
# zshardctl: each command's flags
"$bin/zshardctl" --help | awk '/^  [a-z]/ {print $1}' | while read -r c; do
	page_has zshardctl ".SS \"$c " || no "zshardctl $c is not in its page"
	"$bin/zshardctl" "$c" --help 2>/dev/null | awk '/^  --/ {print substr($1, 3)}' |
		while read -r flag; do
			page_has zshardctl "\\-\\-$(echo "$flag" | sed 's/-/\\-/g')" ||
				no "zshardctl $c --$flag is not in its page"
		done
done
# the job spec's keys, as model/spec_json.c refuses any other
sed -n '/keys\[\] = {/,/NULL};/p' "$root/model/spec_json.c" | grep -o '"[a-z_0-9]*"' | tr -d '"' |
	sort -u | while read -r k; do
		awk '/^\.SH JOB SPEC/ {on = 1; next} /^\.SH/ {on = 0} on' "$man/zshardctl.1" |
			grep -qE "(\\\\fB|\\.B )$k(\\\\fR|\$)" || no "job spec key '$k' is not in zshardctl's JOB SPEC"
	done
# zshard-local: what its case statement takes
sed -n 's/^[[:space:]]*\(--[a-z-]*\)).*/\1/p' "$root/deploy/local/zshard-local" | sort -u |
	while read -r flag; do
		"$root/deploy/local/zshard-local" --help | grep -q -- "$flag" ||
			no "zshard-local $flag is not in its --help"
		page_has zshard-local "$(echo "$flag" | sed 's/-/\\-/g')" ||
			no "zshard-local $flag is not in its page"
	done
[ -s "$fails" ] && exit 1
echo "man: every flag, key and job spec key is in a page ($(wc -l <"$man/keys.txt") keys)"
