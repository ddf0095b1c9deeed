# Input files a user can get wrong (sourced by tests/hostile.sh; see probe
# there): weights with NaN or infinity, FIFOs where a file is read, outputs
# that cannot be written, and the messages that name what is wrong.

# st_patch IN OUT MODE TENSOR [INDEX]: a copy of the safetensors file IN with
# one change: MODE nan / inf sets element INDEX of TENSOR (an F32 tensor),
# MODE rank2 stores the 1-D TENSOR as (n, 1) (same bytes, a valid file).
st_patch() {
  python3 - "$@" <<'PY'
import json, math, struct, sys
src, dst, mode, name = sys.argv[1:5]
b = bytearray(open(src, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
head = json.loads(b[8:8 + n])
t = head[name]
if mode in ('nan', 'inf'):
    at = 8 + n + t['data_offsets'][0] + 4 * int(sys.argv[5])
    b[at:at + 4] = struct.pack('<f', math.nan if mode == 'nan' else math.inf)
elif mode == 'rank2':
    t['shape'] = [t['shape'][0], 1]
    text = json.dumps(head).encode()
    text += b' ' * ((8 - len(text) % 8) % 8)
    b = struct.pack('<Q', len(text)) + text + b[8 + n:]
open(dst, 'wb').write(b)
PY
}

# ---- item 4: NaN / Inf weights in --init ----------------------------------------------
zt train "${TINY[@]}" --steps 1 --export "$WORK/base.safetensors" > /dev/null 2>&1
st_patch base.safetensors nan.safetensors nan h.0.ln_1.bias 5
st_patch base.safetensors inf.safetensors inf h.0.attn.c_attn.weight 130
st_patch base.safetensors rank2.safetensors rank2 h.0.ln_1.bias
probe "--init with a NaN weight" 2 "nan.safetensors': tensor 'h.0.ln_1.bias' holds NaN at index 5 of 64" 30 -- \
  zt train "${TINY[@]}" --init "$WORK/nan.safetensors" --export "$WORK/out.safetensors"
check "a refused --init exports nothing" test ! -e "$WORK/out.safetensors"
probe "--init with +inf (a transposed weight)" 2 "tensor 'h.0.attn.c_attn.weight' holds \+inf at index 130" 30 -- \
  zt train "${TINY[@]}" --init "$WORK/inf.safetensors"
probe "--init with a NaN weight on 2 ranks" 2 "holds NaN at index 5" 60 -- \
  ztn 2 train "${TINY[@]}" --init "$WORK/nan.safetensors"
probe "--init with the clean file still works" 0 "" 30 -- zt train "${TINY[@]}" --init "$WORK/base.safetensors"
# ---- item 14: a shape printed with its real rank ----------------------------------------
probe "--init (64, 1) where (64) is needed" 2 "has shape \(64, 1\), this model needs \(64\)$" 30 -- \
  zt train "${TINY[@]}" --init "$WORK/rank2.safetensors"

# ---- item 6: FIFOs where a file is read: refused at once, never a hang ------------------
mkfifo "$WORK/fifo"
probe "--data is a fifo" 2 "data file '$WORK/fifo' is a fifo, not a regular file" 20 -- \
  zt train "${TINY[@]}" --data "$WORK/fifo"
probe "--data is a fifo, 2 ranks" 2 "is a fifo, not a regular file" 60 -- ztn 2 train "${TINY[@]}" --data "$WORK/fifo"
mkdir "$WORK/shards" && mkfifo "$WORK/shards/a.bin"
probe "--data glob matching a fifo" 2 "shards/a.bin' is a fifo" 20 -- zt train "${TINY[@]}" --data "$WORK/shards/*.bin"
probe "--init is a fifo" 2 "'$WORK/fifo' is a fifo, not a regular file" 20 -- zt train "${TINY[@]}" --init "$WORK/fifo"
probe "--init is a fifo, 2 ranks" 2 "is a fifo, not a regular file" 60 -- ztn 2 train "${TINY[@]}" --init "$WORK/fifo"
probe "--init is a character device" 2 "'/dev/zero' is a character device, not a regular file" 20 -- \
  zt train "${TINY[@]}" --init /dev/zero
mkdir "$WORK/ck_latest" && mkfifo "$WORK/ck_latest/latest"
probe "--resume: 'latest' is a fifo" nz "latest' is a fifo, not a regular file" 20 -- \
  zt train "${TINY[@]}" --resume "$WORK/ck_latest"
probe "--resume: 'latest' is a fifo, 2 ranks" nz "latest' is a fifo, not a regular file" 60 -- \
  ztn 2 train "${TINY[@]}" --resume "$WORK/ck_latest"
# a real checkpoint whose manifest, then whose shard file, is a fifo
zt train "${TINY[@]}" --steps 2 --save "$WORK/ck" > /dev/null 2>&1
cp -r "$WORK/ck" "$WORK/ck_shard"
m=$(echo "$WORK"/ck/step_*/manifest.json) && rm "$m" && mkfifo "$m"
probe "--resume: manifest.json is a fifo" nz "manifest.json' is a fifo, not a regular file" 20 -- \
  zt train "${TINY[@]}" --steps 4 --resume "$WORK/ck"
s=$(echo "$WORK"/ck_shard/step_*/*.bin) && rm "$s" && mkfifo "$s"
probe "--resume: a shard file is a fifo" nz "shard.*\.bin' is a fifo, not a regular file" 20 -- \
  zt train "${TINY[@]}" --steps 4 --resume "$WORK/ck_shard"

# ---- item 7: outputs checked before step 1 ------------------------------------------------
# a run of 10^6 steps: only a check at start-up ends it within the limit
LONG=(--device cpu --model tiny --steps 1000000 --quiet)
probe "--export into a missing directory" 2 "--export '$WORK/nodir/w.safetensors': directory '$WORK/nodir'" 20 -- \
  zt train "${LONG[@]}" --export "$WORK/nodir/w.safetensors"
probe "--export names a directory" 2 "--export '$WORK' is a directory" 20 -- zt train "${LONG[@]}" --export "$WORK"
touch "$WORK/afile"
probe "--export under a file" 2 "'$WORK/afile' is a file, not a directory" 20 -- \
  zt train "${LONG[@]}" --export "$WORK/afile/w.safetensors"
probe "--save under a file" 2 "'$WORK/afile' is not a directory: it is a file" 20 -- zt train "${LONG[@]}" --save "$WORK/afile/ck"
probe "--save under a file, 2 ranks" 2 "is not a directory: it is a file" 60 -- ztn 2 train "${LONG[@]}" --save "$WORK/afile/ck"
probe "--save creates its directory" 0 "" 30 -- zt train "${TINY[@]}" --save "$WORK/new/deep/ck"
check "--save left no probe file" test -z "$(ls -A "$WORK/new/deep/ck" | grep probe)"
# the export's directory disappears during the run: the weights go to a fallback
export_gone() {
  mkdir -p "$WORK/gone"
  ZEROC_BIND=0 TMPDIR="$WORK" "$ZEROC" train --device cpu --model tiny --steps 300 --quiet \
    --metrics "$WORK/gone.jsonl" --export "$WORK/gone/w.safetensors" &
  local pid=$!
  while ! [ -s "$WORK/gone.jsonl" ] && kill -0 $pid 2> /dev/null; do sleep 0.05; done
  rm -rf "$WORK/gone"
  wait $pid
}
export -f export_gone
probe "--export fails at the end: weights written elsewhere" 1 "weights were written to '$WORK/zeroc-export-[0-9]+-[0-9a-f]{16}\.safetensors' instead" 120 -- export_gone
check "the fallback export loads" bash -c 'f=$(ls "$WORK"/zeroc-export-*.safetensors) && "$ZEROC" train --device cpu --model tiny --steps 1 --quiet --init "$f"'

# ---- item 14: messages that are not empty and say what a path is -------------------------
probe "--metrics cannot be opened" nz "ZEROC_ERR_IO: .*--metrics '$WORK/nodir/m.jsonl': cannot open for writing: No such file" 30 -- \
  zt train "${TINY[@]}" --metrics "$WORK/nodir/m.jsonl"
probe "--nvme-dir is a file" 2 "--nvme-dir '$WORK/afile' is a file, not a directory" 20 -- \
  zt train "${TINY[@]}" --offload-optimizer nvme --nvme-dir "$WORK/afile"

# Criteo TSV files that are not text (issue 37, item 9): the message names the NUL byte,
# not a line length; a genuinely long line names its length
CRITEO=(--device cpu --model dlrm-mlperf --rows 100 --batch 4 --steps 1 --quiet)
printf '1\t2\0003\n' > "$WORK/nul.tsv"
probe "Criteo line with a NUL byte" nz "nul.tsv:1: a NUL byte at column 4: not a Criteo TSV file" 30 -- zt train "${CRITEO[@]}" --data "$WORK/nul.tsv"
head -c 4096 "$ZEROC" > "$WORK/binary.tsv"
probe "a binary file as Criteo --data" nz "binary.tsv:1: a NUL byte at column [0-9]+: not a Criteo TSV file" 30 -- zt train "${CRITEO[@]}" --data "$WORK/binary.tsv"
python3 -c "print('1' * 70000)" > "$WORK/long.tsv"
probe "a Criteo line of 70000 bytes" nz "long.tsv:1: line of 70000 bytes, longer than 65534" 30 -- zt train "${CRITEO[@]}" --data "$WORK/long.tsv"

# A file with more blocks than the model (issue 37, item 7): refused naming a tensor of the
# extra block, by train --init and by sample --init, GPT-2's and the Llama family's names
zt train --device cpu --model tiny --layers 3 --steps 1 --quiet --export "$WORK/l3.safetensors" > /dev/null 2>&1
probe "train --init of a file with a block more" nz "tensor 'h\.2\.[a-z_.12]+' is of block 2, and this model has 2 layers" 30 -- zt train "${TINY[@]}" --init "$WORK/l3.safetensors"
probe "sample --init of a file with a block more" nz "tensor 'h\.2\.[a-z_.12]+' is of block 2, and this model has 2 layers" 30 -- zt sample --init "$WORK/l3.safetensors" --tokenizer bytes --prompt x
rm -rf "$WORK/ll3" && zt train --device cpu --model llama-tiny --layers 3 --steps 1 --quiet --export "$WORK/ll3" > /dev/null 2>&1
probe "train --init of a Llama file with a block more" nz "tensor 'model\.layers\.2\.[a-z_.]+' is of block 2, and this model has 2 layers" 30 -- zt train --device cpu --model llama-tiny --steps 1 --quiet --init "$WORK/ll3/model.safetensors"
probe "sample --init of a Llama file with a block more" nz "tensor 'model\.layers\.2\.[a-z_.]+' is of block 2, and this model has 2 layers" 30 -- zt sample --model llama-tiny --init "$WORK/ll3/model.safetensors" --tokenizer bytes --prompt x

# A tokenizer that cannot encode a document's text (issue 37, item 10): a vocabulary of
# "a" and "b" only, no byte-level alphabet, no unknown token; a document of other letters
# is refused naming it, where it was written as nothing with exit 0
ab_tokenizer "$WORK/ab.json"
printf 'zzz zzz\n' > "$WORK/zzz.txt"
probe "data: a document the tokenizer cannot encode" nz "document '.*zzz.txt' \(8 bytes\) encodes to no token" 30 -- zt data --tokenizer "$WORK/ab.json" --out "$WORK/zd" "$WORK/zzz.txt"
printf 'abab ba\n' > "$WORK/ab.txt"
probe "data: a document it can encode" 0 "" 30 -- zt data --tokenizer "$WORK/ab.json" --out "$WORK/ad" "$WORK/ab.txt"
