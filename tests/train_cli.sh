#!/usr/bin/env bash
# tests/train_cli.sh - `zeroc train` end to end on real ranks: the loss falls,
# checkpoints resume bit for bit (and onto another dp size), safetensors round
# trip, corrupt checkpoints are refused, bad flags get one line and exit 2.
# usage: train_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-train-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }   # one value per line
COMMON=(--model tiny --lr 3e-3 --warmup 5 --seed 11)

case $NAME in
loss_falls)
  run 4 "${COMMON[@]}" --zero 3 --steps 60 --metrics "$WORK/m.jsonl" || fail "training exited $?"
  [ "$(wc -l < "$WORK/m.jsonl")" = 60 ] || fail "expected 60 metrics lines"
  first=$(field "$WORK/m.jsonl" loss | head -1); last=$(field "$WORK/m.jsonl" loss | tail -5 | sort -g | tail -1)
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.5) }' || fail "loss $first -> $last did not fall by 1.5"
  # bf16 parameters and gradients (fp32 compute copies on the cpu) learn too
  run 4 "${COMMON[@]}" --zero 3 --steps 30 --dtype bf16 --metrics "$WORK/b.jsonl" || fail "bf16 run"
  b1=$(field "$WORK/b.jsonl" loss | head -1); b2=$(field "$WORK/b.jsonl" loss | tail -1)
  awk -v a="$b1" -v b="$b2" 'BEGIN { exit !(b < a - 0.8) }' || fail "bf16 loss $b1 -> $b2 did not fall by 0.8"
  echo "loss $first -> $last; bf16 $b1 -> $b2" ;;

resume_bitwise)
  run 4 "${COMMON[@]}" --steps 16 --save "$WORK/ck" --save-every 8 --metrics "$WORK/a.jsonl" || fail "first run"
  [ -f "$WORK/ck/step_00000008/manifest.json" ] || fail "no checkpoint at step 8"
  [ "$(cat "$WORK/ck/latest")" = step_00000016 ] || fail "latest is not step 16"
  run 4 "${COMMON[@]}" --steps 16 --resume "$WORK/ck/step_00000008" --metrics "$WORK/b.jsonl" || fail "resumed run"
  field "$WORK/a.jsonl" loss | tail -8 > "$WORK/a.loss"; field "$WORK/b.jsonl" loss > "$WORK/b.loss"
  [ "$(wc -l < "$WORK/b.loss")" = 8 ] || fail "resumed run should log steps 9..16"
  cmp -s "$WORK/a.loss" "$WORK/b.loss" || { paste "$WORK/a.loss" "$WORK/b.loss"; fail "losses differ after resume"; }
  field "$WORK/a.jsonl" grad_norm | tail -8 > "$WORK/a.n"; field "$WORK/b.jsonl" grad_norm > "$WORK/b.n"
  cmp -s "$WORK/a.n" "$WORK/b.n" || fail "gradient norms differ after resume"
  echo "8 steps after resume bitwise identical" ;;

resume_other_dp)
  # saved on 4 ranks (batch 2), resumed on 2 ranks (batch 4): the same global batch
  run 4 "${COMMON[@]}" --batch 2 --steps 12 --save "$WORK/ck" --save-every 6 --metrics "$WORK/a.jsonl" || fail "4-rank run"
  run 2 "${COMMON[@]}" --batch 4 --steps 12 --resume "$WORK/ck/step_00000006" --metrics "$WORK/b.jsonl" || fail "2-rank resume"
  field "$WORK/a.jsonl" loss | tail -6 > "$WORK/a.loss"; field "$WORK/b.jsonl" loss > "$WORK/b.loss"
  paste "$WORK/a.loss" "$WORK/b.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) bad++ } END { exit bad > 0 }' \
    || { paste "$WORK/a.loss" "$WORK/b.loss"; fail "losses differ by more than 1e-5 relative"; }
  echo "resumed on 2 ranks within 1e-5" ;;

safetensors_roundtrip)
  run 2 "${COMMON[@]}" --steps 5 --export "$WORK/a.safetensors" || fail "export run"
  run 4 "${COMMON[@]}" --steps 0 --init "$WORK/a.safetensors" --export "$WORK/b.safetensors" || fail "init run"
  cmp -s "$WORK/a.safetensors" "$WORK/b.safetensors" || fail "export -> init -> export changed the file"
  head -c 400 "$WORK/a.safetensors" | grep -q '"h.0.attn.c_attn.weight":{"dtype":"F32","shape":\[64,192\]' \
    || head -c 600 "$WORK/a.safetensors" | grep -q 'h.0.attn.c_attn.weight' || fail "no GPT-2 names in the file"
  echo "round trip identical" ;;

corrupt_checkpoint)
  run 2 "${COMMON[@]}" --steps 4 --save "$WORK/ck" || fail "saving run"
  f=$(ls "$WORK"/ck/step_00000004/*.bin | head -1)
  cp -a "$WORK/ck" "$WORK/orig"
  printf '\x55' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
  out=$(run 2 "${COMMON[@]}" --steps 8 --resume "$WORK/ck" --save "$WORK/ck" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "a corrupt checkpoint was accepted"
  echo "$out" | grep -q "fails its checksum" || fail "no checksum message: $out"
  echo "$out" | grep -q "$(basename "$f")" || fail "message does not name the file: $out"
  [ ! -e "$WORK/ck/step_00000008" ] || fail "a new checkpoint was written after the failure"
  [ "$(cat "$WORK/ck/latest")" = step_00000004 ] || fail "latest changed"
  echo "refused: $(echo "$out" | grep -m1 checksum)" ;;

bad_flags)
  for args in "--zero 4" "--steps -1" "--model huge" "--lr abc" "--hsdp 3" "--tp 3" "--dtype fp16" "--bogus 1" "--batch" "--save-every 5"; do
    out=$(run 2 $args 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "'$args' exited $rc, want 2 ($out)"
    lines=$(echo "$out" | grep -c "zeroc train")
    [ "$lines" = 1 ] || fail "'$args' printed $lines zeroc lines: $out"
    flag=${args%% *}
    echo "$out" | grep -q -- "${flag}" || [ "$flag" = --hsdp ] || [ "$flag" = --tp ] || fail "'$args': message does not name $flag: $out"
  done
  echo "10 bad invocations: exit 2, one line each" ;;
memory_prediction)
  # the planner's per-rank prediction against the accountant's measured peak
  for cfg in "--zero 0" "--zero 1" "--zero 2" "--zero 3" "--zero 3 --recompute full" \
             "--zero 2 --grad-accum 2 --batch 2" "--zero 3 --prefetch 0" "--zero 1 --hsdp 2" \
             "--zero 1 --grad-accum 2 --batch 2 --dtype bf16"; do
    run 4 --model small --steps 2 $cfg --metrics "$WORK/m.jsonl" || fail "'$cfg' run"
    peak=$(tail -1 "$WORK/m.jsonl" | sed 's/.*"peak_bytes": {"device": \([0-9]*\).*/\1/')
    pred=$(tail -1 "$WORK/m.jsonl" | sed 's/.*"predicted_bytes": {"device": \([0-9]*\).*/\1/')
    awk -v a="$peak" -v b="$pred" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.10) }' \
      || fail "'$cfg': measured $peak bytes, predicted $pred (more than 10% apart)"
    echo "$cfg: measured $peak predicted $pred"
  done ;;
bench)
  # zeroc bench on 4 ranks: every ZeRO layout and HSDP run, the files appear,
  # and stages 1, 2, 3 (same math, same reduce-scatter) agree bit for bit
  $MPIRUN $FLAGS -np 4 "$ZEROC" bench --device cpu --out "$WORK/b" --steps 5 --warmup-steps 2 > "$WORK/out.txt" 2>&1 \
    || { cat "$WORK/out.txt"; fail "bench exited $?"; }
  for f in bench.csv bench.md; do [ -s "$WORK/b/$f" ] || fail "no $f"; done
  command -v gnuplot >/dev/null && { [ -s "$WORK/b/bench.png" ] || fail "no bench.png"; }
  for l in zero-0 zero-1 zero-2 zero-3 hsdp-2x2; do
    grep -q "^$l,.*,ok," "$WORK/b/bench.csv" || fail "layout $l not ok: $(grep "^$l," "$WORK/b/bench.csv")"
  done
  losses=$(grep -E '^zero-[123],' "$WORK/b/bench.csv" | awk -F, '{ print $16 }' | sort -u | wc -l)
  [ "$losses" = 1 ] || fail "ZeRO-1/2/3 losses differ: $(grep -E '^zero-[123],' "$WORK/b/bench.csv")"
  grep -q "^| zero-3 |" "$WORK/b/bench.md" || fail "bench.md has no table"
  echo "bench: $(grep -c ',ok,' "$WORK/b/bench.csv") layouts ok" ;;
offload)
  # offloading the optimizer (host memory, NVMe files) and ZeRO-3 parameter
  # shards changes where state lives, not the math: bitwise the same losses
  mkdir -p "$WORK/nvme"
  for np in 2 4; do
    for z in 2 3; do
      run $np "${COMMON[@]}" --zero $z --steps 6 --metrics "$WORK/base.jsonl" || fail "np $np zero $z baseline"
      field "$WORK/base.jsonl" loss > "$WORK/base.loss"
      cfgs=("--offload-optimizer cpu" "--offload-optimizer nvme --nvme-dir $WORK/nvme")
      [ $z = 3 ] && cfgs+=("--offload-params cpu" "--offload-params nvme --nvme-dir $WORK/nvme"
                          "--offload-optimizer nvme --offload-params nvme --nvme-dir $WORK/nvme")
      for cfg in "${cfgs[@]}"; do
        run $np "${COMMON[@]}" --zero $z --steps 6 $cfg --metrics "$WORK/o.jsonl" || fail "np $np zero $z '$cfg'"
        field "$WORK/o.jsonl" loss > "$WORK/o.loss"
        cmp -s "$WORK/base.loss" "$WORK/o.loss" || { paste "$WORK/base.loss" "$WORK/o.loss"; fail "np $np zero $z '$cfg': losses differ"; }
      done
    done
  done
  [ -z "$(ls -A "$WORK/nvme")" ] || fail "swap files left behind: $(find "$WORK/nvme" | head)"
  # offloaded state goes through checkpoints like in-memory state
  run 2 "${COMMON[@]}" --steps 8 --save "$WORK/ck" --save-every 4 --offload-optimizer nvme --nvme-dir "$WORK/nvme" \
    --metrics "$WORK/a.jsonl" || fail "save with nvme offload"
  run 2 "${COMMON[@]}" --steps 8 --resume "$WORK/ck/step_00000004" --metrics "$WORK/b.jsonl" || fail "resume on the device"
  field "$WORK/a.jsonl" loss | tail -4 > "$WORK/a.loss"; field "$WORK/b.jsonl" loss > "$WORK/b.loss"
  cmp -s "$WORK/a.loss" "$WORK/b.loss" || fail "resume from an offloaded run changed the losses"
  # a directory that is not there, or not writable: one line, exit 2
  out=$(run 2 --offload-optimizer nvme --nvme-dir "$WORK/missing" 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -q "no such directory" || fail "missing nvme dir: rc $rc: $out"
  echo "offload: bitwise identical losses in every mode, files removed, checkpoints round trip" ;;
header_attention)
  # the header names the attention kernels in use; --deterministic is accepted and, on the
  # cpu (deterministic kernels either way), leaves the losses bit for bit
  out=$($MPIRUN $FLAGS -np 1 "$ZEROC" train --device cpu "${COMMON[@]}" --steps 3 \
        --metrics "$WORK/a.jsonl" 2>&1) || fail "run exited $?: $out"
  echo "$out" | grep -q "^  attention: cpu kernels (zeroc's own, fp32)$" || fail "no attention line in the header: $out"
  run 1 "${COMMON[@]}" --steps 3 --deterministic --metrics "$WORK/b.jsonl" || fail "--deterministic run exited $?"
  field "$WORK/a.jsonl" loss > "$WORK/a.loss"; field "$WORK/b.jsonl" loss > "$WORK/b.loss"
  [ -s "$WORK/a.loss" ] && cmp -s "$WORK/a.loss" "$WORK/b.loss" || fail "--deterministic changed the cpu losses"
  out=$(run 1 --deterministic 1 2>&1 >/dev/null); rc=$?
  [ $rc = 2 ] || fail "'--deterministic 1' (a switch takes no value) exited $rc: $out"
  echo "header: attention line present; --deterministic bitwise on the cpu; a value refused" ;;
*) fail "unknown test $NAME" ;;
esac
