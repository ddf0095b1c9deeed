# `zeroc sample` given bad input (sourced by tests/hostile.sh; see probe there):
# weights a file cannot hold, files that are not what they must be, an untied
# head, a prompt far longer than the context.

# st_head IN OUT: IN with an lm_head.weight that is wte with one value changed
st_head() {
  python3 - "$@" <<'PY'
import json, struct, sys
src, dst = sys.argv[1:3]
b = open(src, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
head = json.loads(b[8:8 + n])
data = b[8 + n:]
w = head['wte.weight']
lo, hi = w['data_offsets']
extra = bytearray(data[lo:hi])
extra[40] ^= 0x01
head['lm_head.weight'] = {'dtype': w['dtype'], 'shape': w['shape'],
                          'data_offsets': [len(data), len(data) + len(extra)]}
text = json.dumps(head).encode()
text += b' ' * ((8 - len(text) % 8) % 8)
open(dst, 'wb').write(struct.pack('<Q', len(text)) + text + data + bytes(extra))
PY
}

zt train "${TINY[@]}" --steps 1 --export "$WORK/base.safetensors" > /dev/null 2>&1
S=(sample --tokenizer bytes --tokens 8)
python3 - "$WORK/base.safetensors" "$WORK/nan.safetensors" <<'PY'
import json, math, struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
t = json.loads(b[8:8 + n])['h.1.mlp.c_fc.bias']
at = 8 + n + t['data_offsets'][0] + 4 * 7
b[at:at + 4] = struct.pack('<f', math.nan)
open(sys.argv[2], 'wb').write(b)
PY
st_head "$WORK/base.safetensors" "$WORK/untied.safetensors"
head -c 1000 "$WORK/base.safetensors" > "$WORK/short.safetensors"
mkfifo "$WORK/fifo.safetensors"
echo '{"model": {"type": "BPE", "vocab": 5}}' > "$WORK/bad_tokenizer.json"

probe "sample --init with a NaN weight" 2 "tensor 'h.1.mlp.c_fc.bias' holds NaN at index 7" 30 -- \
  zt "${S[@]}" --prompt hi --init "$WORK/nan.safetensors"
probe "sample --init with an untied lm_head" 2 "lm_head.weight differs from wte.weight .*untied" 30 -- \
  zt "${S[@]}" --prompt hi --init "$WORK/untied.safetensors"
probe "train --init with an untied lm_head" 2 "the LM head is untied" 30 -- \
  zt train "${TINY[@]}" --init "$WORK/untied.safetensors"
probe "sample --init of a truncated file" nz "short.safetensors" 30 -- \
  zt "${S[@]}" --prompt hi --init "$WORK/short.safetensors"
probe "sample --init of a FIFO: refused, no hang" nz "" 10 -- \
  zt "${S[@]}" --prompt hi --init "$WORK/fifo.safetensors"
probe "sample --init of a directory" nz "" 10 -- zt "${S[@]}" --prompt hi --init "$WORK"
probe "sample --resume of a file" nz "" 20 -- zt "${S[@]}" --prompt hi --resume "$WORK/base.safetensors"
probe "sample --tokenizer not a tokenizer" 2 "--tokenizer" 10 -- \
  zt sample --tokens 8 --prompt hi --init "$WORK/base.safetensors" --tokenizer "$WORK/bad_tokenizer.json"
probe "sample --prompt of 100 KB (keeps the last --seq tokens)" 0 "" 30 -- \
  zt "${S[@]}" --init "$WORK/base.safetensors" --prompt "$(head -c 100000 /dev/zero | tr '\0' 'a')"
probe "sample --temperature nan" 2 "--temperature" 10 -- \
  zt "${S[@]}" --prompt hi --init "$WORK/base.safetensors" --temperature nan
probe "sample --temperature 1e400 (overflows)" 2 "--temperature" 10 -- \
  zt "${S[@]}" --prompt hi --init "$WORK/base.safetensors" --temperature 1e400
