# Defects the 2026-11-28 hostile testing found (issue 37, items 8 and 12), each
# probe failing before its fix (sourced by tests/hostile.sh; see probe there):
# the step a skip warning names, a fault's step range, flags ignored in silence
# and numbers read wrongly at the edges.

# ---- item 8: skipped steps named by the step they are, a fault's range kept -----------
# NaN gradients at steps 3-5: each of them warns with its own number, and the
# range ends at 5 (step 6 trains)
probe "the skip warnings name steps 3, 4, 5" 0 "step 5 skipped" 60 -- \
  ev ZEROC_FAULT=nan@grad:step=3-5 ZEROC_DEBUG=WARN zt train --device cpu --model tiny --steps 7 --metrics m8.jsonl
check "  ... steps 3, 4 and 5 warned once each, in order" \
  bash -c '[ "$(echo "$0" | grep -oE "step [0-9]+ skipped" | tr "\n" " ")" = "step 3 skipped step 4 skipped step 5 skipped " ]' "$OUT"
check "  ... exactly steps 3-5 skipped (step 6 trained)" \
  bash -c '[ "$(grep -c "\"skipped\": 1" m8.jsonl)" = 3 ] && grep "\"step\": 6," m8.jsonl | grep -q "\"skipped\": 0"'

# ---- item 12: flags that did nothing are refused ----------------------------------------
probe "--sample-tokens without --sample-every" 2 "--sample-tokens needs --sample-every" 20 -- \
  zt train "${TINY[@]}" --sample-tokens 16 --tokenizer bytes
probe "--cp-mode without --cp" 2 "--cp-mode needs --cp N" 20 -- zt train "${TINY[@]}" --cp-mode ulysses
probe "--rows with a trailing comma" 2 "rows '10,': accepted a comma list.*no empty item" 20 -- \
  zt train --device cpu --model dlrm-tiny --steps 1 --tables 1 --rows 10,
zt train "${TINY[@]}" --steps 1 --export "$WORK/s.safetensors" > /dev/null 2>&1
probe "--temperature 1e-320 (a denormal) is a temperature" 0 "" 30 -- \
  zt sample --init "$WORK/s.safetensors" --tokenizer bytes --prompt "ab" --tokens 4 --temperature 1e-320
printf 'one small document\n' > doc.txt
probe "--val-fraction 1e-300 takes no token, and says so" 0 "val: +none \(the --val-fraction share came to no token" 60 -- \
  zt data --tokenizer bytes --out d12 --val-fraction 1e-300 doc.txt
check "  ... and writes no val shard" bash -c '! ls d12/val_*.bin 2> /dev/null'
