#!/usr/bin/env bash
# tests/install_static.sh - the installed static archive as a user links it,
# both ways the install offers: `pkg-config --static zeroc` (the archive named
# instead of -lzeroc) and CMake's find_package(zeroc) with zeroc::zeroc_static;
# then zeroc::zeroc (shared) from the same package. Each program creates a
# context, shards nothing (a clean error) and finalizes, so the link pulls in
# the runtime, the comm, the device (cuda when built), the shard engine and the
# tokenizer (utf8proc).
# usage: install_static.sh BUILD_DIR LIBDIR (CMAKE_INSTALL_LIBDIR) CC
set -u
BUILD=$1 LIBDIR=$2 CC=$3
DIR=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-static-XXXXXX")
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$BUILD" --prefix "$DIR/prefix" > "$DIR/install.log" 2>&1 \
  || { cat "$DIR/install.log"; fail "cmake --install --prefix $DIR/prefix"; }
[ -f "$DIR/prefix/$LIBDIR/libzeroc.a" ] || fail "no libzeroc.a installed"
mkdir -p "$DIR/src"
cat > "$DIR/src/p.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <zeroc/zeroc.h>
int main(void) {
  zeroc_tokenizer_t *tok = NULL; /* its objects call utf8proc (NFC) */
  if (zeroc_tokenizer_load("bytes", &tok)) { printf("tokenizer: %s\n", zeroc_last_error(NULL)); return 1; }
  zeroc_tokenizer_destroy(tok);
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  zeroc_ctx_t *ctx = NULL;
  if (zeroc_ctx_create(&ctx, &cc)) { printf("create: %s\n", zeroc_last_error(NULL)); return 1; }
  zeroc_model_t *m = NULL;
  zeroc_result_t r = zeroc_shard(ctx, NULL, 1, NULL, &m);
  int ok = r == ZEROC_ERR_INVALID_ARG && strstr(zeroc_last_error(ctx), "layer list is NULL");
  printf("zeroc %s: world %d, %s\n", ZEROC_VERSION_STRING, zeroc_ctx_mesh(ctx)->world,
         zeroc_last_error(ctx));
  return zeroc_ctx_finalize(ctx) == ZEROC_OK && ok ? 0 : 1;
}
C
run() { # program, how it was linked
  out=$("$1" 2>&1) || fail "running the program linked with $2: $out"
  echo "$out" | grep -q "^zeroc [0-9].*world 1" || fail "unexpected output ($2): $out"
}

# 1. pkg-config --static: every library the archive needs, from the .pc alone
export PKG_CONFIG_PATH="$DIR/prefix/$LIBDIR/pkgconfig"
libs=$(pkg-config --static --libs zeroc) || fail "pkg-config --static --libs zeroc"
echo "pkg-config --static: $libs"
# shellcheck disable=SC2086  # pkg-config's flags are words
"$CC" "$DIR/src/p.c" -o "$DIR/p_pc" $(pkg-config --cflags zeroc) \
  ${libs/-lzeroc/-l:libzeroc.a} > "$DIR/cc.log" 2>&1 \
  || { tail -30 "$DIR/cc.log"; fail "linking the archive with pkg-config --static's flags"; }
ldd "$DIR/p_pc" | grep -q libzeroc && fail "the pkg-config program loads libzeroc.so"
run "$DIR/p_pc" "pkg-config --static"

# 2. CMake: zeroc::zeroc_static and zeroc::zeroc from find_package(zeroc)
cat > "$DIR/src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(user C)
find_package(zeroc REQUIRED)
add_executable(p_static p.c)
target_link_libraries(p_static PRIVATE zeroc::zeroc_static)
add_executable(p_shared p.c)
target_link_libraries(p_shared PRIVATE zeroc::zeroc)
CM
cmake -S "$DIR/src" -B "$DIR/b" -DCMAKE_C_COMPILER="$CC" -DCMAKE_PREFIX_PATH="$DIR/prefix" \
  > "$DIR/cm.log" 2>&1 || { tail -30 "$DIR/cm.log"; fail "configuring a project with find_package(zeroc)"; }
cmake --build "$DIR/b" > "$DIR/build.log" 2>&1 \
  || { tail -30 "$DIR/build.log"; fail "building against zeroc::zeroc_static / zeroc::zeroc"; }
ldd "$DIR/b/p_static" | grep -q libzeroc && fail "zeroc::zeroc_static loads libzeroc.so"
run "$DIR/b/p_static" "zeroc::zeroc_static"
ldd "$DIR/b/p_shared" | grep -q "$DIR/prefix/.*libzeroc" || fail "zeroc::zeroc does not load the installed libzeroc.so"
run "$DIR/b/p_shared" "zeroc::zeroc"
echo "installed; linked the static archive with pkg-config --static and with zeroc::zeroc_static, and the shared library with zeroc::zeroc; all ran"
