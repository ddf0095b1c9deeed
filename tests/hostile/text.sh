# Text and tokenizers a user can get wrong (issue 37; sourced by tests/hostile.sh,
# see probe there): a sampling or validation tokenizer that is not the data's,
# tokenizer.json files whose messages named the wrong problem, a tokenizer that
# drops some of the text, a document of megabytes of spaces.
FIX="$HERE/fixtures/tokenizer"
head -c 60000 "$FIX/real.txt" > "$WORK/a.txt" 2> /dev/null || cp "$FIX/real.txt" "$WORK/a.txt"
cat "$FIX/real.txt" "$FIX/tricky.txt" > "$WORK/b.txt"
zt data --tokenizer "$FIX/bpe300.json" --out "$WORK/d300" "$WORK/a.txt" "$WORK/b.txt" > /dev/null 2>&1
zt data --tokenizer "$FIX/bpe1000.json" --out "$WORK/d1000" "$WORK/a.txt" "$WORK/b.txt" > /dev/null 2>&1
zt data --tokenizer bytes --out "$WORK/dbytes" "$WORK/a.txt" "$WORK/b.txt" > /dev/null 2>&1
cp -r "$WORK/d300" "$WORK/d300copy"

# ---- item 6: the sampling tokenizer, the training data's and --val-data's agree --------
# a run of 10^6 steps: only a check at start-up ends it within the limit (it died at the
# first sample step, the steps after the last save lost)
LM=(--device cpu --model tiny --vocab 1024 --seq 16 --batch 2 --quiet)
probe "train --tokenizer bytes on bpe shards, --sample-every" 2 "--tokenizer 'bytes' is not the tokenizer the data was made with, '$WORK/d300/tokenizer.json' \(bytes, vocab 256 against bpe, vocab 300\)" 30 -- \
  zt train "${LM[@]}" --steps 1000000 --data "$WORK/d300" --tokenizer bytes --sample-every 5
probe "the same, 2 ranks" 2 "--tokenizer 'bytes' is not the tokenizer the data was made with" 60 -- \
  ztn 2 train "${LM[@]}" --steps 1000000 --data "$WORK/d300" --tokenizer bytes --sample-every 5
probe "train --tokenizer FILE, the data's own file: samples" 0 "" 60 -- \
  zt train "${LM[@]}" --steps 2 --data "$WORK/d300" --tokenizer "$FIX/bpe300.json" --sample-every 2
check "  ... and printed a sample at step 2" bash -c 'echo "$0" | grep -aq "^step 2 sample"' "$OUT"
probe "--val-data made with another bpe tokenizer" 2 "val_data '$WORK/d1000/val_\*.bin' was tokenized with '$WORK/d1000/tokenizer.json' and the training data '$WORK/d300' with '$WORK/d300/tokenizer.json', another tokenizer \(bpe, vocab 1000 against bpe, vocab 300\)" 30 -- \
  zt train "${LM[@]}" --steps 1000000 --data "$WORK/d300" --val-data "$WORK/d1000/val_*.bin"
probe "--val-data made with bytes, 2 ranks" 2 "another tokenizer \(bytes, vocab 256 against bpe, vocab 300\)" 60 -- \
  ztn 2 train "${LM[@]}" --steps 1000000 --data "$WORK/d300" --val-data "$WORK/dbytes/val_*.bin"
probe "--val-data from a copy of the data's directory: accepted" 0 "" 60 -- \
  zt train "${LM[@]}" --steps 2 --data "$WORK/d300" --val-data "$WORK/d300copy/val_*.bin"
# only one side records its tokenizer: nothing to compare, said in one line (rank 0's),
# where it passed in silence
mkdir "$WORK/bare"; cp "$WORK/d300"/*.bin "$WORK/bare/"
probe "--val-data records a tokenizer, the data none: warns" 0 "val_data '$WORK/d300/val_\*.bin' records its tokenizer \('$WORK/d300/tokenizer.json'\) and the training data '$WORK/bare/train_\*.bin' records none" 60 -- \
  ztn 2 train "${LM[@]}" --steps 2 --data "$WORK/bare/train_*.bin" --val-data "$WORK/d300/val_*.bin"
check "  ... in one line" test "$(echo "$OUT" | grep -c "records none")" = 1
probe "the data records a tokenizer, --val-data none: warns" 0 "the training data '$WORK/d300' records its tokenizer \('$WORK/d300/tokenizer.json'\) and val_data '$WORK/bare/val_\*.bin' records none" 60 -- \
  zt train "${LM[@]}" --steps 2 --data "$WORK/d300" --val-data "$WORK/bare/val_*.bin"

# ---- item 11: tokenizer.json messages name the real problem ------------------------------
# tok_variant OUT MODE: bpe300.json with one change
tok_variant() {
  python3 - "$FIX/bpe300.json" "$@" <<'PY'
import json, sys
src, dst, mode = sys.argv[1:4]
raw = open(src, 'rb').read()
d = json.loads(raw)
v = d['model']['vocab']
k = list(v)[3]  # "#"
if mode == 'bom':
    open(dst, 'wb').write(b'\xef\xbb\xbf' + raw)
    sys.exit()
if mode == 'frac': v[k] = 1.5
if mode == 'string': v[k] = "7"
if mode == 'nul': d['model']['merges'][0] = "a\u0000b c"
text = json.dumps(d)
if mode == 'long': text = text.replace('"#": 3', '"#": ' + '1' * 5000)
open(dst, 'w').write(text)
PY
}
for m in frac string bom nul long; do tok_variant "$WORK/t_$m.json" $m; done
TD=(data --out "$WORK/dx" "$WORK/a.txt")
probe "tokenizer id 1.5 (was: has id 2)" 2 "vocab entry 3 \"#\" has id 1.5, not an integer" 10 -- zt "${TD[@]}" --tokenizer "$WORK/t_frac.json"
probe "tokenizer id \"7\" (was: has id 0)" 2 "vocab entry 3 \"#\" has the string \"7\" as id, not a number" 10 -- zt "${TD[@]}" --tokenizer "$WORK/t_string.json"
probe "tokenizer.json with a UTF-8 BOM (was: not a JSON object)" 2 "starts with a UTF-8 byte-order mark \(bytes EF BB BF\)" 10 -- zt "${TD[@]}" --tokenizer "$WORK/t_bom.json"
probe "a NUL in a merge (was: names \"a\")" 2 "merge 0 names \"a\\\\u0000b\", which is not in the vocab" 10 -- zt "${TD[@]}" --tokenizer "$WORK/t_nul.json"
probe "a 5000-digit id (was: cut before the reason)" 2 "number 1{20}\.\.\.1{10} \(5000 characters\) is out of the range of a double" 10 -- zt "${TD[@]}" --tokenizer "$WORK/t_long.json"
check "refused tokenizers wrote nothing" test ! -e "$WORK/dx"

# ---- item 13: megabytes of spaces are one word per piece: linear, not n log n ------------
# (40 MB took 14.6 s, now about 1.6 s: measured in benchmarks/RESULTS.md, not here; tests
# hold no timings, so the limit is only the hang guard and the probe checks the run ends
# with exit 0)
head -c 10000000 /dev/zero | tr '\0' ' ' > "$WORK/spaces.txt"
probe "data on 10 MB of spaces" 0 "" 60 -- zt data --tokenizer "$FIX/bpe1000.json" --out "$WORK/dsp" "$WORK/spaces.txt"
check "  ... wrote its tokens" test -s "$WORK/dsp/train_000000.bin"
# no white space to cut at: a forced cut every 4 MB chunk, each warned (2 here, 10 for 40 MB)
check "  ... warned of its forced cuts once" test "$(echo "$OUT" | grep -c "no white space between")" = 1
rm -f "$WORK/spaces.txt"

# ---- item 10: a tokenizer that drops some of the text warns, once, with the count --------
# a vocabulary of "a" and "b" only (no byte-level alphabet, no unknown token): a document
# of other letters is refused (tests/hostile/inputs.sh); one that keeps some of its text
# was written without a word about the rest
ab_tokenizer "$WORK/ab.json"
printf 'abab zz ba\n' > "$WORK/p1.txt"; printf 'abba\n' > "$WORK/p2.txt"; printf 'ab\n' > "$WORK/p3.txt"; printf 'ab' > "$WORK/p4.txt"
probe "data: a tokenizer that drops some of the text warns" 0 "data: the tokenizer has no token for 7 bytes of 3 documents \(the first: '$WORK/p1.txt'\); they are left out" 30 -- \
  zt data --tokenizer "$WORK/ab.json" --out "$WORK/dab" "$WORK/p1.txt" "$WORK/p2.txt" "$WORK/p3.txt" "$WORK/p4.txt"
check "  ... in one line" test "$(echo "$OUT" | grep -c "has no token for")" = 1
probe "data: text it covers whole: no warning" 0 "" 30 -- zt data --tokenizer "$WORK/ab.json" --out "$WORK/dab4" "$WORK/p4.txt"
check "  ... none" test "$(echo "$OUT" | grep -c "has no token for")" = 0
