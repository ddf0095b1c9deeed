#!/usr/bin/env bash
# tests/data_cli.sh - `zeroc data` end to end: shards of real text with the
# bytes tokenizer (the same for 1 and 4 threads, --shard-tokens cuts, quoted
# globs, the summary), every refusal with one line and exit 2 and nothing
# written, and `zeroc train` on the prepared shards (2 ranks) plus its refusal
# of a model whose vocab is smaller than the recorded tokenizer's; one run at a
# time per output directory, and what killed runs left removed.
# usage: data_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-data-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }   # one value per line
LIC=/usr/share/common-licenses
[ -r $LIC/GPL-3 ] || { echo "skipped: no $LIC"; exit 77; }
data() { "$ZEROC" data "$@"; }

case $NAME in
data_prepare)
  data --tokenizer bytes --out "$WORK/a" --threads 1 "$LIC/*" > "$WORK/a.out" 2> "$WORK/a.err" || fail "bytes run: $(cat "$WORK/a.err")"
  grep -q "^zeroc data: 17 documents" "$WORK/a.out" || fail "summary: $(cat "$WORK/a.out")"
  grep -q "train: [0-9]* tokens in 1 shard" "$WORK/a.out" || fail "no train line: $(cat "$WORK/a.out")"
  grep -q "val: *[0-9]* tokens in 1 shard" "$WORK/a.out" || fail "no val line: $(cat "$WORK/a.out")"
  grep -q "tokens/s" "$WORK/a.out" || fail "no tokens/s"
  [ -f "$WORK/a/train_000000.bin" ] && [ -f "$WORK/a/val_000000.bin" ] && [ -f "$WORK/a/tokenizer.json" ] \
    || fail "missing outputs: $(ls "$WORK/a")"
  # the train and val tokens are all the text's bytes (the bytes tokenizer has
  # no end-of-text token): 2 bytes a token plus a 1024-byte header per shard
  text=$(cat $LIC/* | wc -c)
  bytes=$(( $(stat -c %s "$WORK/a/train_000000.bin") + $(stat -c %s "$WORK/a/val_000000.bin") ))
  [ "$bytes" = $(( 2 * text + 2048 )) ] || fail "shards hold $bytes bytes for $text bytes of text"
  # the token bytes in order are the text: the low bytes of the uint16 tokens
  tail -c +1025 "$WORK/a/train_000000.bin" | head -c 400 | od -An -v -tu1 -w2 | awk '{ printf "%c", $1 }' > "$WORK/train.txt"
  cmp -s <(head -c 200 $LIC/Apache-2.0) <(head -c 200 "$WORK/train.txt") || fail "the first shard does not start with Apache-2.0's text"
  # the same shards on 4 threads; a quoted glob and a plain path are both inputs
  data --tokenizer bytes --out "$WORK/b" --threads 4 --quiet "$LIC/[A-F]*" "$LIC/G*" "$LIC/[L-Z]*" > /dev/null 2>&1 || fail "4-thread run"
  cmp "$WORK/a/train_000000.bin" "$WORK/b/train_000000.bin" || fail "train shards differ between 1 and 4 threads"
  cmp "$WORK/a/val_000000.bin" "$WORK/b/val_000000.bin" || fail "val shards differ between 1 and 4 threads"
  # --shard-tokens cuts the stream into shards of that many tokens
  data --tokenizer bytes --out "$WORK/c" --shard-tokens 50000 --val-fraction 0 --quiet "$LIC/*" > "$WORK/c.out" || fail "sharded run"
  n=$(ls "$WORK/c"/train_*.bin | wc -l)
  [ "$n" = $(( (text + 49999) / 50000 )) ] || fail "$n shards for $text tokens of 50000 a shard"
  [ ! -e "$WORK/c/val_000000.bin" ] || fail "val shards with --val-fraction 0"
  [ "$(stat -c %s "$WORK/c/train_000001.bin")" = $(( 1024 + 100000 )) ] || fail "a middle shard is not 50000 tokens"
  # --force replaces a set, and the earlier run's extra shards go
  data --tokenizer bytes --out "$WORK/c" --force --quiet "$LIC/*" > /dev/null || fail "--force run"
  [ "$(ls "$WORK/c"/train_*.bin | wc -l)" = 1 ] || fail "stale shards left: $(ls "$WORK/c")"
  ! ls "$WORK/c" | grep -q tmp || fail "temporary files left: $(ls "$WORK/c")"
  # after --, every argument is an input
  data --tokenizer bytes --out "$WORK/e" --quiet -- $LIC/BSD > "$WORK/e.out" || fail "-- run"
  grep -q "^zeroc data: 1 document," "$WORK/e.out" || fail "-- run: $(cat "$WORK/e.out")"
  echo "17 documents, $text bytes: identical shards on 1 and 4 threads, $n shards of 50000 tokens" ;;

data_bad_flags)
  echo x > "$WORK/file"
  mkdir -p "$WORK/full"
  data --tokenizer bytes --out "$WORK/full" --quiet $LIC/BSD > /dev/null || fail "setup run"
  check() {  # check 'what the message says' args...
    local want=$1; shift
    out=$(data "$@" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "'$*' exited $rc, want 2 ($out)"
    [ "$(echo "$out" | grep -c "zeroc data")" = 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] || fail "'$*' printed: $out"
    echo "$out" | grep -q -- "$want" || fail "'$*': message does not say '$want': $out"
    [ ! -e "$WORK/new" ] || fail "'$*' created the output directory"
  }
  check "/nonexistent/x.txt" --tokenizer bytes --out "$WORK/new" $LIC/BSD /nonexistent/x.txt
  check "matches no files" --tokenizer bytes --out "$WORK/new" "$WORK/nothing/*.txt"
  check "--val-fraction '1'" --tokenizer bytes --out "$WORK/new" --val-fraction 1 $LIC/BSD
  check "--val-fraction 'abc'" --tokenizer bytes --out "$WORK/new" --val-fraction abc $LIC/BSD
  check "--val-fraction '-0.1'" --tokenizer bytes --out "$WORK/new" --val-fraction -0.1 $LIC/BSD
  check "--shard-tokens '0'" --tokenizer bytes --out "$WORK/new" --shard-tokens 0 $LIC/BSD
  check "--threads '0'" --tokenizer bytes --out "$WORK/new" --threads 0 $LIC/BSD
  check "is a regular file" --tokenizer bytes --out "$WORK/file" $LIC/BSD
  check "--force" --tokenizer bytes --out "$WORK/full" $LIC/BSD
  check "$WORK/none.json" --tokenizer "$WORK/none.json" --out "$WORK/new" $LIC/BSD
  check "--tokenizer is required" --out "$WORK/new" $LIC/BSD
  check "--out DIR is required" --tokenizer bytes $LIC/BSD
  check "no input files" --tokenizer bytes --out "$WORK/new"
  check "unknown flag '--bogus'" --tokenizer bytes --out "$WORK/new" --bogus 1 $LIC/BSD
  check "is a directory" --tokenizer bytes --out "$WORK/new" $LIC
  echo "15 bad invocations: exit 2, one line each, nothing written" ;;

data_train)
  data --tokenizer bytes --out "$WORK/d" --quiet "$LIC/*" > /dev/null || fail "prepare"
  run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
  # the directory stands for its train_*.bin shards
  $MPIRUN $FLAGS -np 2 "$ZEROC" train --model tiny --vocab 256 --device cpu --steps 12 --lr 3e-3 --seed 3 \
    --data "$WORK/d" --metrics "$WORK/m.jsonl" > "$WORK/train.out" || fail "training on the prepared shards"
  grep -q "data tokenizer: $WORK/d/tokenizer.json (vocab 256)" "$WORK/train.out" || fail "header: $(cat "$WORK/train.out")"
  first=$(field "$WORK/m.jsonl" loss | head -1); last=$(field "$WORK/m.jsonl" loss | tail -1)
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' || fail "loss $first -> $last did not fall by 0.5"
  run 2 --model tiny --vocab 256 --device cpu --steps 2 --data "$WORK/d/train_*.bin" || fail "the glob"
  # the recorded tokenizer has 256 ids: a model with 200 is refused at once
  out=$(run 2 --model tiny --vocab 200 --device cpu --steps 2 --data "$WORK/d" 2>&1 >/dev/null); rc=$?
  [ $rc = 2 ] || fail "vocab 200 on 256-id data exited $rc: $out"
  echo "$out" | grep -q "vocab 256" && echo "$out" | grep -q "vocab 200" || fail "message does not name both vocabs: $out"
  [ "$(echo "$out" | grep -c "zeroc train")" = 1 ] || fail "not one line: $out"
  echo "loss $first -> $last on 2 ranks; vocab 200 refused: $(echo "$out" | sed 's/.*: data/data/')" ;;
data_signal)
  # SIGINT mid-run: exit 130, and nothing is left (not even the new directory).
  # 100 copies of the licenses (30 MB) through BPE on one thread take seconds.
  tok=$(dirname "$0")/fixtures/tokenizer/bpe1000.json
  args=(); for i in $(seq 100); do args+=("$LIC/*"); done
  "$ZEROC" data --tokenizer "$tok" --out "$WORK/sig/out" --threads 1 "${args[@]}" > "$WORK/sig.out" 2> "$WORK/sig.err" &
  pid=$!
  sleep 0.3; kill -INT $pid; wait $pid; rc=$?
  [ $rc = 130 ] || fail "SIGINT: exit $rc, want 130: $(cat "$WORK/sig.err")"
  grep -q "stopped by signal 2; nothing was written" "$WORK/sig.err" || fail "no message: $(cat "$WORK/sig.err")"
  [ ! -e "$WORK/sig/out" ] || fail "left behind: $(ls -la "$WORK/sig/out")"
  echo "SIGINT: exit 130, nothing left" ;;
data_lock)
  # one run at a time per --out: a second refuses with one line and writes
  # nothing; a run killed with -9 leaves temporaries that the next run removes
  # and mentions. 300 copies of the licenses through BPE on one thread: seconds.
  tok=$(dirname "$0")/fixtures/tokenizer/bpe1000.json
  args=(); for i in $(seq 300); do args+=("$LIC/*"); done
  small=(--tokenizer bytes --threads 1 "$LIC/GPL-3")
  mkdir -p "$WORK/o"
  # the lock as another run holds it (flock on the directory)
  flock -n -o "$WORK/o" sleep 5 &
  fl=$!; sleep 0.3
  out=$(data "${small[@]}" --out "$WORK/o" 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -q "is being written by another zeroc data run" || fail "locked: exit $rc: $out"
  [ "$(echo "$out" | wc -l)" = 1 ] || fail "not one line: $out"
  [ -z "$(ls -A "$WORK/o")" ] || fail "the refused run wrote: $(ls -A "$WORK/o")"
  kill $fl 2> /dev/null; wait $fl 2> /dev/null
  # two real runs into one --out: the second, started while the first writes, refuses
  "$ZEROC" data --tokenizer "$tok" --out "$WORK/o" --threads 1 --quiet "${args[@]}" > /dev/null 2> "$WORK/a.err" &
  a=$!
  for _ in $(seq 100); do ls "$WORK"/o/*.tmp.* > /dev/null 2>&1 && break; sleep 0.05; done
  ls "$WORK"/o/*.tmp.* > /dev/null 2>&1 || { kill -9 $a; fail "the first run wrote no temporary"; }
  out=$(data "${small[@]}" --out "$WORK/o" --force 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -q "is being written by another zeroc data run" || { kill -9 $a; fail "concurrent run: exit $rc: $out"; }
  # killed with -9 mid-run: its temporaries stay, until the next run
  kill -9 $a; wait $a 2> /dev/null
  n=$(ls "$WORK"/o/*.tmp.* 2> /dev/null | wc -l)
  [ "$n" -ge 1 ] || fail "no temporaries left by the killed run"
  data "${small[@]}" --out "$WORK/o" > /dev/null 2> "$WORK/c.err" || fail "the run after the kill: $(cat "$WORK/c.err")"
  grep -q "removed $n temporar.* left in '$WORK/o' by an interrupted run" "$WORK/c.err" || fail "not mentioned: $(cat "$WORK/c.err")"
  [ -z "$(ls "$WORK"/o/*.tmp.* 2> /dev/null)" ] || fail "temporaries left: $(ls "$WORK/o")"
  [ "$(cd "$WORK/o" && ls | tr '\n' ' ')" = "tokenizer.json train_000000.bin val_000000.bin " ] || fail "outputs: $(ls "$WORK/o")"
  echo "locked --out refused; concurrent run refused; $n dead temporaries removed and mentioned" ;;
data_force_commit)
  # a --force run killed while putting its files in place (the 4th of them):
  # the next run into --out restores the earlier set whole, bit for bit
  sums() { (cd "$1" && ls -A | grep -v '^\.zeroc-data-old' | xargs md5sum); }
  data --tokenizer bytes --out "$WORK/f" --shard-tokens 50000 --quiet "$LIC/*" > /dev/null || fail "first set"
  sums "$WORK/f" > "$WORK/old.sums"
  old_n=$(ls "$WORK"/f/train_*.bin "$WORK"/f/val_*.bin | wc -l)
  ZEROC_FAULT='kill@data.commit:step=3' "$ZEROC" data --tokenizer bytes --out "$WORK/f" --force \
    --shard-tokens 20000 --val-fraction 0 --quiet "$LIC/*" > /dev/null 2>&1; rc=$?
  [ $rc = 137 ] || fail "the killed run exited $rc"
  ls -d "$WORK"/f/.zeroc-data-old.* > /dev/null 2>&1 || fail "no earlier set aside: $(ls -A "$WORK/f")"
  out=$(data --tokenizer bytes --out "$WORK/f" --quiet "$LIC/GPL-3" 2>&1); rc=$?
  echo "$out" | grep -q "earlier set is restored" || fail "no restore said: $out"
  [ $rc = 2 ] && echo "$out" | grep -q "already holds $old_n shard" || fail "after the restore: exit $rc: $out"
  sums "$WORK/f" | cmp -s - "$WORK/old.sums" || { sums "$WORK/f" | diff - "$WORK/old.sums"; fail "the restored set differs"; }
  [ -z "$(ls -A "$WORK/f" | grep zeroc-data-old)" ] || fail "the aside directory is left"
  # and a --force run that completes replaces the set whole, nothing old left
  data --tokenizer bytes --out "$WORK/f" --force --shard-tokens 20000 --val-fraction 0 --quiet "$LIC/*" > /dev/null || fail "--force"
  [ -z "$(ls "$WORK"/f/val_*.bin 2> /dev/null)" ] && [ -z "$(ls -A "$WORK/f" | grep -e zeroc-data-old -e '\.tmp\.')" ] \
    || fail "after --force: $(ls -A "$WORK/f")"
  echo "killed mid-commit: the earlier $old_n-shard set restored whole by the next run; --force replaces whole" ;;
*) fail "unknown test $NAME" ;;
esac
