#!/usr/bin/env bash
# tests/exports.sh - libzeroc.so exports the public API and nothing else:
# every function declared in include/zeroc/*.h is a dynamic symbol of the
# shared library, and every dynamic symbol the library defines is one of them
# (no zeroc__* internals, no zeroc_k_* kernels, nothing of the CUDA toolkit).
# The exports come from cmake/zeroc.map.
# usage: exports.sh LIBZEROC_SO CC INCLUDE_DIR BUILD_INCLUDE_DIR
set -u
LIB=$1 CC=$2 INC=$3 BINC=$4
DIR=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-exports-XXXXXX")
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The declared functions: the umbrella header, preprocessed (no comments, no
# macros), every zeroc_* name followed by '(' that is not a function-pointer
# type's '(*', less the static inline helpers (they are not in the library).
"$CC" -E -P -I"$INC" -I"$BINC" "$INC/zeroc/zeroc.h" > "$DIR/api.i" 2> "$DIR/cc.log" \
  || { cat "$DIR/cc.log"; fail "preprocessing $INC/zeroc/zeroc.h"; }
grep -oP '\bzeroc_\w+(?=\s*\((?!\s*\*))' "$DIR/api.i" | sort -u > "$DIR/named"
grep -oP 'static[^;{(]*\bzeroc_\w+(?=\s*\()' "$DIR/api.i" | grep -oP 'zeroc_\w+$' | sort -u > "$DIR/inline"
comm -23 "$DIR/named" "$DIR/inline" > "$DIR/declared"
[ -s "$DIR/declared" ] || fail "no function declarations found in $INC/zeroc/zeroc.h"

# The exported symbols: defined dynamic symbols, less the version nodes (type A),
# without their @VERSION suffix; and those not in the version node ZEROC_0.1.
nm -D --defined-only "$LIB" > "$DIR/nm" 2> "$DIR/nm.log" || { cat "$DIR/nm.log"; fail "nm -D $LIB"; }
awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' "$DIR/nm" | sort -u > "$DIR/exported"
awk '$2 != "A" && $3 !~ /@@?ZEROC_0\.1$/ { print $3 }' "$DIR/nm" | sort -u > "$DIR/unversioned"

comm -13 "$DIR/declared" "$DIR/exported" > "$DIR/extra"
comm -23 "$DIR/declared" "$DIR/exported" > "$DIR/missing"
ok=1
if [ -s "$DIR/extra" ]; then
  echo "$(wc -l < "$DIR/extra") symbol(s) exported that no public header declares (cmake/zeroc.map):"
  head -40 "$DIR/extra" | sed 's/^/  /'
  ok=0
fi
if [ -s "$DIR/missing" ]; then
  echo "$(wc -l < "$DIR/missing") public function(s) not exported (add them to cmake/zeroc.map):"
  sed 's/^/  /' "$DIR/missing"
  ok=0
fi
if [ -s "$DIR/unversioned" ]; then
  echo "$(wc -l < "$DIR/unversioned") symbol(s) exported outside the version node ZEROC_0.1 (cmake/zeroc.map):"
  head -40 "$DIR/unversioned" | sed 's/^/  /'
  ok=0
fi
[ $ok = 1 ] || fail "the exports of $LIB differ from the public API"
echo "$LIB exports $(wc -l < "$DIR/exported") symbols: the $(wc -l < "$DIR/declared") functions of the public headers"
