#!/usr/bin/env bash
# fuzz/run_fuzz.sh - runs one libFuzzer target for a bounded time (the `fuzz`
# CTest label). New interesting inputs go to BUILD_DIR/corpus/TARGET; a crash,
# leak or slow input (> 10 s) is saved under BUILD_DIR/artifacts/TARGET and
# fails the test: copy it into tests/fuzz_corpus/TARGET/ so that the default
# suite replays it from then on.
# usage: run_fuzz.sh BINARY TARGET SECONDS BUILD_DIR INPUT_DIR...
set -u
bin=$1 target=$2 secs=$3 out=$4
shift 4
mkdir -p "$out/corpus/$target" "$out/artifacts/$target"
dirs=("$out/corpus/$target")
for d in "$@"; do [ -d "$d" ] && dirs+=("$d"); done
extra=()
dict="$(dirname "$0")/$target.dict"
[ -f "$dict" ] && extra+=(-dict="$dict")
# Open MPI keeps allocations until exit; leaks inside one input are still found.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:leak_check_at_exit=0:abort_on_error=1}
"$bin" "${dirs[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
  -artifact_prefix="$out/artifacts/$target/" -close_fd_mask=3 -print_final_stats=1 "${extra[@]}"
rc=$?
if [ $rc -ne 0 ]; then
  echo "fuzz_$target: libFuzzer exited $rc; the input is in $out/artifacts/$target/:"
  ls -l "$out/artifacts/$target/"
  echo "copy it into tests/fuzz_corpus/$target/ so the default suite replays it"
fi
exit $rc
