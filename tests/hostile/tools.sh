# zeroc bench and zeroc plan given nonsense, or layouts train runs (sourced by
# tests/hostile.sh; see probe there). Bench probes stay cheap: the tiny model,
# a few steps, one or two layouts. The probes of bad input leave --device out
# (train's default) so that each shows its own defect, not the flag's absence.
BENCH=(--device cpu --model tiny --steps 3 --warmup-steps 1)

# ---- zeroc bench: nonsense must fail with one line, never an exit-0 empty table
probe "bench --only with an unknown layout" 2 "--only.*'bogus'.*accepted.*zero-0" 60 -- \
  ztn 2 bench "${BENCH[@]}" --out "$WORK/b1" --only bogus
check "bench --only bogus wrote nothing" test ! -e "$WORK/b1"
probe "bench --only with one good, one unknown layout" 2 "--only.*'zero-9'" 60 -- \
  ztn 2 bench "${BENCH[@]}" --out "$WORK/b2" --only zero-1,zero-9
probe "bench --train with an unknown flag" 2 "zeroc train: unknown flag '--bogus'" 60 -- \
  ztn 2 bench "${BENCH[@]}" --out "$WORK/b3" --only zero-1 --train "--bogus 1"
check "bench --train --bogus wrote nothing" test ! -e "$WORK/b3"
probe "bench --train with a bad value" 2 "zeroc train: --lr 'x'" 60 -- \
  ztn 2 bench "${BENCH[@]}" --out "$WORK/b4" --only zero-1 --train "--lr x"
probe "bench --train setting a layout flag" 2 "--train.*--tp" 60 -- \
  ztn 2 bench "${BENCH[@]}" --out "$WORK/b5" --only zero-1 --train "--tp 2"
echo "not a directory" > "$WORK/file"
probe "bench --out is a regular file" 2 "--out '.*file'.*not a directory" 60 -- \
  ztn 2 bench "${BENCH[@]}" --out "$WORK/file" --only zero-1
check "bench --out file left intact" grep -qx "not a directory" "$WORK/file"
probe "bench --out under a regular file" 2 "--out '.*file/sub'.*cannot create" 60 -- \
  ztn 2 bench "${BENCH[@]}" --out "$WORK/file/sub" --only zero-1
probe "bench --device bogus" 2 "--device 'tpu': accepted auto, cpu, cuda" 30 -- \
  zt bench --device tpu "${BENCH[@]}" --out "$WORK/b6"
probe "bench --device cpu, one layout, succeeds" 0 "zero-1 .*tokens/s" 120 -- \
  ztn 2 bench --device cpu "${BENCH[@]}" --out "$WORK/b7" --only zero-1
check "bench --only lists just that layout" bash -c "[ \$(grep -c ',ok,' '$WORK/b7/bench.csv') = 1 ] && grep -q '^zero-1,' '$WORK/b7/bench.csv'"
check "bench --device reaches the runs" grep -q "device cpu" "$WORK/b7/bench.md"

# ---- zeroc plan: accepts exactly what train runs, refuses with no plan printed
probe "plan --pp 3 over 4 layers (train runs it)" 0 "pipeline stage" 20 -- \
  zt plan --model small --pp 3 --gpus 3
check "plan --pp 3 predicts a non-zero peak" bash -c "echo \"\$0\" | grep -qE '^  total +[0-9.]+ of' && ! echo \"\$0\" | grep -qE 'total +0\.00 '" "$OUT"
probe "plan --pp 3 --json has a non-zero total" 0 '"total": [1-9][0-9]*, "host"' 20 -- \
  zt plan --model small --pp 3 --gpus 3 --json
probe "plan refuses more stages than units" 2 "--pp 7 x --vpp 1 = 7 pipeline stages" 20 -- \
  zt plan --model small --pp 7 --gpus 7
check "plan printed no plan after refusing" test -z "$(zt plan --model small --pp 7 --gpus 7 2>/dev/null)"
probe "train refuses the same" 2 "--pp 7 x --vpp 1 = 7 pipeline stages" 20 -- \
  zt train "${TINY[@]}" --model small --pp 7
probe "train --pp 3 predicts a non-zero peak" 0 "predicted peak device memory per rank [1-9]" 120 -- \
  ztn 3 train --device cpu --model small --steps 1 --pp 3
# (the limit is the Llama family's: token ids are 32-bit, shards above 65536 ids uint32)
probe "plan --vocab over train's limit" 2 "--vocab '20000000': accepted an integer 2..16777216" 20 -- \
  zt plan --vocab 20000000
probe "train --vocab over the limit (same line)" 2 "--vocab '20000000': accepted an integer 2..16777216" 20 -- \
  zt train "${TINY[@]}" --vocab 20000000
probe "plan --vpp over train's limit" 2 "--vpp '65': accepted an integer 1..64" 20 -- \
  zt plan --pp 2 --gpus 2 --vpp 65
probe "plan --dtype takes train's names" 0 "bf16" 20 -- zt plan --dtype auto
probe "plan --dtype fp16 lists train's names" 2 "--dtype 'fp16': accepted auto, fp32, bf16" 20 -- \
  zt plan --dtype fp16
