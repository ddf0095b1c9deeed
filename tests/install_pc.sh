#!/usr/bin/env bash
# tests/install_pc.sh - what a user of the installed library does: install the
# build into a fresh prefix with `cmake --install --prefix`, then compile and
# link a small program with nothing but `pkg-config --cflags --libs zeroc` and
# run it. The .pc must point into that prefix, not the configure-time one.
# usage: install_pc.sh BUILD_DIR LIBDIR (CMAKE_INSTALL_LIBDIR, e.g. lib) CC
set -u
BUILD=$1 LIBDIR=$2 CC=$3
DIR=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-install-XXXXXX")
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$BUILD" --prefix "$DIR/prefix" > "$DIR/install.log" 2>&1 \
  || { cat "$DIR/install.log"; fail "cmake --install --prefix $DIR/prefix"; }
export PKG_CONFIG_PATH="$DIR/prefix/$LIBDIR/pkgconfig"
[ -f "$PKG_CONFIG_PATH/zeroc.pc" ] || fail "no zeroc.pc in $PKG_CONFIG_PATH"
flags=$(pkg-config --cflags --libs zeroc) || fail "pkg-config --cflags --libs zeroc"
echo "pkg-config: $flags"
cat > "$DIR/hello.c" <<'C'
#include <stdio.h>
#include <zeroc/zeroc.h>
int main(void) {
  printf("zeroc %s: %s\n", ZEROC_VERSION_STRING, zeroc_result_string(ZEROC_ERR_INVALID_ARG));
  return 0;
}
C
# shellcheck disable=SC2086  # pkg-config's flags are words
"$CC" "$DIR/hello.c" -o "$DIR/hello" $flags > "$DIR/cc.log" 2>&1 \
  || { cat "$DIR/cc.log"; fail "compiling and linking with pkg-config's flags"; }
libdir=$(pkg-config --variable=libdir zeroc)
[ "$(cd "$libdir" 2>/dev/null && pwd -P)" = "$(cd "$DIR/prefix/$LIBDIR" && pwd -P)" ] \
  || fail "libdir '$libdir' is not in the install prefix $DIR/prefix"
# a sanitizer build's library needs the sanitizer's runtime loaded first (scripts/sanitize);
# a user's plain program does not bring it, so preload it as the sanitizer asks
pre=$(LD_LIBRARY_PATH="$libdir" ldd "$libdir/libzeroc.so" | awk '/lib(a|t|ub)san\.so/ { print $3 }' | head -1)
out=$(LD_PRELOAD="$pre" LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$DIR/hello" 2>&1) \
  || fail "running the program: $out"
echo "$out" | grep -q "^zeroc [0-9]" || fail "unexpected output: $out"
# it ran against the installed library, not the build tree's
LD_LIBRARY_PATH="$libdir" ldd "$DIR/hello" | grep -q "$DIR/prefix/.*libzeroc" \
  || fail "the program does not load libzeroc from the prefix: $(ldd "$DIR/hello" | grep zeroc)"
# a user model (examples/resmlp.c) the way README.md says: pkg-config's flags and an rpath
# to the installed library, run with no LD_LIBRARY_PATH
SRC=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC2086  # pkg-config's flags are words
"$CC" "$SRC/examples/resmlp.c" -o "$DIR/resmlp" $flags -Wl,-rpath,"$libdir" -lm > "$DIR/cc2.log" 2>&1 \
  || { cat "$DIR/cc2.log"; fail "compiling examples/resmlp.c with pkg-config's flags and an rpath"; }
out2=$(env -u LD_LIBRARY_PATH LD_PRELOAD="$pre" "$DIR/resmlp" --steps 2 2>&1) \
  || fail "running resmlp (rpath, no LD_LIBRARY_PATH): $out2"
echo "$out2" | grep -q "^eval loss [0-9]" || fail "unexpected resmlp output: $out2"
echo "installed into a temporary prefix; compiled, linked and ran with pkg-config: $out; resmlp with an rpath: $(echo "$out2" | tail -1)"
