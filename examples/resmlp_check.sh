#!/usr/bin/env bash
# examples/resmlp_check.sh - the user's residual MLP (resmlp.c) in several layouts
# against the single-rank run: its step losses, held-out mean loss
# (zeroc_model_eval_mean) and accuracy (zeroc_ctx_allreduce) to 1e-5 relative; the
# loss falls; weights exported by one layout and imported by another evaluate to
# the exporter's figure (zeroc_model_export / _import); the activations it registers
# (act_bytes) are the accountant's peak activations.
# usage: resmlp_check.sh BINARY MPIRUN "MPIRUN_FLAGS"
set -u
BIN=$1 MPIRUN=$2 FLAGS=$3
W=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-resmlp-XXXXXX")
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { # out np args...
  local out=$1 np=$2
  shift 2
  # shellcheck disable=SC2086  # the flags are words
  $MPIRUN $FLAGS -np "$np" "$BIN" "$@" > "$W/$out" 2> "$W/$out.err" \
    || { cat "$W/$out.err"; fail "-np $np $* exited $?"; }
}
# the numbers of a run's output, one a line (step losses, eval loss, accuracy)
nums() { awk '/^step/ { print $4 } /^eval/ { print $3; print $5 }' "$W/$1"; }
same() { # a b tolerance what
  [ "$(nums "$1" | wc -l)" = "$(nums "$2" | wc -l)" ] || fail "$4: $(nums "$2" | wc -l) figures, 1 rank $(nums "$1" | wc -l)"
  paste <(nums "$1") <(nums "$2") | awk -v t="$3" -v w="$4" '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 > 0 ? $1 : 1); if (r > m) m = r; if (!(r <= t)) bad++ }
    END { printf "%s: max rel diff %.3g over %d figures\n", w, m, NR; exit bad > 0 }' \
    || { paste "$W/$1" "$W/$2"; fail "$4 differs from the reference"; }
}

run one 1 --stage 0 --export "$W/one.safetensors"
awk '/^step  0/ { a = $4 } /^step 30/ { b = $4 } END { exit !(b < 0.8 * a) }' "$W/one" \
  || { cat "$W/one"; fail "the loss did not fall"; }
# the registered activations (5 units of act_bytes) are the accountant's peak activations
awk '/^activations/ { n++; if ($2 > 0 && $2 == $5) ok++ } END { exit !(n == 1 && ok == 1) }' "$W/one" \
  || { cat "$W/one"; fail "registered activations not the accountant's peak"; }
run zero3_np2 2 --stage 3
same one zero3_np2 1e-5 "ZeRO-3 on 2 ranks"
run zero1_np4 4 --stage 1
same one zero1_np4 1e-5 "ZeRO-1 on 4 ranks"
run hsdp_np4 4 --stage 3 --hsdp 2 --export "$W/four.safetensors"
same one hsdp_np4 1e-5 "HSDP 2x2 ZeRO-3 on 4 ranks"
# weights across layouts: ZeRO-3/HSDP on 4 -> 1 rank, 1 rank -> ZeRO-1 on 2
run four_on_one 1 --steps 0 --import "$W/four.safetensors"
grep '^eval' "$W/hsdp_np4" > "$W/a"; grep '^eval' "$W/four_on_one" > "$W/b"
same a b 1e-6 "4-rank export imported on 1 rank"
run one_on_two 2 --stage 1 --steps 0 --import "$W/one.safetensors"
grep '^eval' "$W/one" > "$W/a"; grep '^eval' "$W/one_on_two" > "$W/b"
same a b 1e-6 "1-rank export imported at ZeRO-1 on 2 ranks"
echo "resmlp: every layout equals the 1-rank run; exports import across layouts"
