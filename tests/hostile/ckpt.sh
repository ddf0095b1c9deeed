# Checkpoints, resume and what a run leaves behind, against damaged or hostile
# input (sourced by tests/hostile.sh; see probe there). Each damaged manifest
# is a copy of a real tiny checkpoint saved at step 4.

# ck_make DIR: a tiny run's checkpoint at step 4 (DIR/latest -> step_00000004)
ck_make() { rm -rf "$1"; zt train "${TINY[@]}" --steps 4 --save "$1" > /dev/null 2>&1; }
mf() { echo "$1/step_00000004/manifest.json"; }
# unseal DIR: drops the manifest's checksum field, as a zeroc before it wrote
# manifests, so that a tampered field is what the load meets
unseal() { sed -i '/"manifest_crc32c"/d; s/^\( "app": .*\),$/\1/' "$(mf "$1")"; }
# setf DIR KEY VALUE: the first integer field KEY of the manifest set to VALUE
setf() { sed -i "0,/\"$2\": [0-9]*/s//\"$2\": $3/" "$(mf "$1")"; }
# bad DIR KEY VALUE: a fresh unsealed checkpoint in DIR with KEY set to VALUE
bad() { ck_make "$1" && unseal "$1" && setf "$1" "$2" "$3"; }
# sigkilled COMMAND...: succeeds when COMMAND dies of SIGKILL (its ZEROC_FAULT)
sigkilled() { "$@"; local rc=$?; [ $rc = 137 ] && echo "killed by its fault" || echo "exit $rc, not SIGKILL"; }
export -f sigkilled

bad ck 'step' $(( (1 << 31) + 5 ))
probe "manifest step 2^31+5 (wraps an int)" nz "below the checkpoint's step 2147483653" 30 -- zt train "${TINY[@]}" --resume ck
bad ck 'step' $(( 1 << 40 ))
probe "manifest step 2^40" nz "below the checkpoint's step 1099511627776" 30 -- zt train "${TINY[@]}" --resume ck
bad ck 'step' $(( 1 << 60 ))
probe "manifest step 2^60" nz "field 'step' 1152921504606846976 is out of range" 30 -- zt train "${TINY[@]}" --resume ck
bad ck 'optimizer_steps' $(( (1 << 32) + 2 ))
probe "manifest optimizer_steps 2^32+2" nz "field 'optimizer_steps' 4294967298 is out of range|optimizer_steps 4294967298 exceeds" 30 -- zt train "${TINY[@]}" --resume ck
bad ck 'pp' $(( (1 << 32) + 1 ))
probe "manifest mesh pp 2^32+1 (wraps to 1)" nz "field 'pp' 4294967297 is out of range" 30 -- zt train "${TINY[@]}" --resume ck
bad ck 'world' $(( 1 << 62 ))
probe "manifest mesh world 2^62" nz "field 'world' 4611686018427387904 is out of range" 30 -- zt train "${TINY[@]}" --resume ck
ck_make ck && unseal ck && crc=$(grep -m1 -o '"crc32c": [0-9]*' "$(mf ck)" | grep -o '[0-9]*$') &&
  setf ck crc32c $(( crc + (1 << 32) ))
probe "files crc32c above 2^32 (cast to 32 bits)" nz "field 'crc32c' [0-9]+ is out of range" 30 -- zt train "${TINY[@]}" --resume ck
bad ck 'shard_size' 0
probe "manifest shard_size 0: says what is wrong" nz "shard_size 0 \(accepted 1\.\." 30 -- zt train "${TINY[@]}" --resume ck
bad ck 'flat_numel' 20484
probe "unit flat_numel off by 4: names the sizes" nz "shard_numel 20480 x shard_size 1 should be flat_numel 20484" 30 -- zt train "${TINY[@]}" --resume ck

# --steps below the checkpoint's step: refused before anything is written
ck_make ck
probe "resume with --steps below the checkpoint's step, --save" nz "--steps 3 is below the checkpoint's step 4" 30 -- zt train "${TINY[@]}" --resume ck --save ck
check "  ... latest still names step 4, nothing new written" \
  bash -c '[ "$(cat ck/latest)" = step_00000004 ] && [ "$(ls ck)" = "$(printf "latest\nstep_00000004")" ]'
probe "  ... and the chain resumes" 0 "" 60 -- zt train "${TINY[@]}" --steps 5 --resume ck --save ck
probe "resume with --steps below the checkpoint's step, no --save" nz "--steps 3 is below the checkpoint's step 5" 30 -- zt train "${TINY[@]}" --resume ck

# the model's shape, parameter names and shapes, the app object, the checksum
ck_make ck
probe "resume with another --heads" nz "model.heads is 4 in the checkpoint, 2 in this run" 30 -- zt train "${TINY[@]}" --steps 5 --heads 2 --resume ck
ck_make ck && unseal ck && sed -i 's/"name": "wpe.weight"/"name": "wpx.weight"/' "$(mf ck)"
probe "parameter renamed in the manifest (same tp)" nz "is 'wpx.weight' in the checkpoint, 'wpe.weight' in this model" 30 -- zt train "${TINY[@]}" --steps 5 --resume ck
ck_make ck && unseal ck &&
  awk '/"shape": \[/ && !done { print; getline a; getline b; sub(/256/, "64", a); sub(/64$/, "256", b); print a; print b; done = 1; next } { print }' \
    "$(mf ck)" > m.tmp && mv m.tmp "$(mf ck)"
probe "parameter shape transposed in the manifest (same numel, same tp)" nz "'wte.weight' \(unit 0\) has shape 64x256 in the checkpoint, 256x64" 30 -- zt train "${TINY[@]}" --steps 5 --resume ck
ck_make ck && unseal ck && sed -i 's/^ "app": .*/ "app": ""/' "$(mf ck)"
probe "manifest app object emptied" nz "'app' object is missing or empty" 30 -- zt train "${TINY[@]}" --steps 5 --resume ck
ck_make ck && setf ck dp_replicate 2
probe "one unused manifest field changed: the checksum catches it" nz "fails its checksum" 30 -- zt train "${TINY[@]}" --steps 5 --resume ck
ck_make ck && unseal ck
probe "a manifest without the checksum field (older zeroc) still loads" 0 "" 60 -- zt train "${TINY[@]}" --steps 5 --resume ck

# the data fingerprint covers content: same names and sizes, other tokens
# shard FILE BYTE: an llm.c shard of 2000 tokens, each 0xBYTEBYTE (below --vocab 4096)
shard() {
  { printf '\x88\xd8\x34\x01\x01\x00\x00\x00\xd0\x07\x00\x00'; head -c 1012 /dev/zero
    head -c 4000 /dev/zero | tr '\0' "\\$2"; } > "$1"
}
shard d.bin 001 && rm -rf ck &&
  zt train "${TINY[@]}" --vocab 4096 --data d.bin --steps 2 --save ck > /dev/null 2>&1 && shard d.bin 002
probe "resume on data of the same names and sizes, other content" nz "data.fingerprint is [0-9]+ in the checkpoint, [0-9]+ in this run" 30 -- zt train "${TINY[@]}" --vocab 4096 --data d.bin --resume ck

# a damaged `latest`: C1 control bytes are shown escaped, never raw
ck_make ck && printf 'step_\xc2\x85\x85\x9b2J\n' > ck/latest
probe "latest holding C1 control bytes" nz "names no checkpoint directory: it holds 'step_\\\\xc2\\\\x85\\\\x85\\\\x9b2J'" 30 -- zt train "${TINY[@]}" --resume ck
check "  ... no raw byte 0x80-0x9f in the message" bash -c '! printf %s "$1" | LC_ALL=C grep -q "[$(printf "\x80-\x9f")]"' _ "$OUT"

# metrics: valid JSON on a skipped step; one line per step across a crash and resume
rm -f m.jsonl
probe "metrics of a run with a skipped step" 0 "" 60 -- ev ZEROC_FAULT=nan@grad:step=2 zt train "${TINY[@]}" --metrics m.jsonl
check "  ... its grad_norm is null, no NaN or Infinity in the file" \
  bash -c 'grep -q "\"step\": 2, \"loss\": [^,]*, \"lr\": [^,]*, \"grad_norm\": null" m.jsonl && ! grep -qiE "[:,] *-?(nan|inf)" m.jsonl'
rm -rf ck m.jsonl
probe "a run killed at step 6 after its step 4 checkpoint" 0 "killed by its fault" 60 -- sigkilled ev ZEROC_FAULT=kill@step:step=6 zt train "${TINY[@]}" --steps 8 --save ck --save-every 4 --metrics m.jsonl
probe "  ... resumed with the same --metrics" 0 "" 60 -- zt train "${TINY[@]}" --steps 8 --resume ck --save ck --metrics m.jsonl
check "  ... the metrics hold steps 1..8 once each" \
  bash -c '[ "$(grep -o "^{\"step\": [0-9]*" m.jsonl | grep -o "[0-9]*$" | tr "\n" " ")" = "1 2 3 4 5 6 7 8 " ]'

# NVMe swap files of a killed run are gone after the next run
mkdir -p nv
probe "a run with nvme offload killed at step 2" 0 "killed by its fault" 60 -- sigkilled ev ZEROC_FAULT=kill@step:step=2 zt train "${TINY[@]}" --offload-optimizer nvme --nvme-dir nv
check "  ... it left swap files (the fault hit)" bash -c '[ -n "$(find nv -type f)" ]'
probe "  ... the next nvme run succeeds" 0 "" 60 -- zt train "${TINY[@]}" --offload-optimizer nvme --nvme-dir nv
check "  ... and nothing is left in --nvme-dir" bash -c '[ -z "$(find nv -mindepth 1)" ]'

# DLRM's table files (issue 37, item 5): a flipped bit fails the file's checksum; a NaN
# weight (in a version-1 file, from before the checksum, which loads unchecked otherwise)
# is refused as non-finite; both name the file
DLRM=(--device cpu --model dlrm-tiny --quiet)
dl_make() { rm -rf "$1"; zt train "${DLRM[@]}" --steps 2 --save "$1" > /dev/null 2>&1; }
# dl_edit DIR PYTHON: runs PYTHON on the first table file's bytes b (a 56-byte header: the
# version at 4, the checksum at 52, the first weight at 56)
dl_edit() {
  local f; f=$(ls "$1"/tables_step_00000002/embed_t0_*.bin | head -1)
  python3 - "$f" "$2" <<'PY'
import struct, sys
f, code = sys.argv[1], sys.argv[2]
b = bytearray(open(f, "rb").read())
exec(code)
open(f, "wb").write(b)
PY
}
dl_make dk && dl_edit dk 'b[56 + 10] ^= 0x04'
probe "DLRM table file with one flipped bit" nz "embed_t0_.*checksum [0-9a-f]+, the header says [0-9a-f]+: the file is damaged" 60 -- zt train "${DLRM[@]}" --steps 3 --resume dk
dl_make dk && dl_edit dk 'b[56:60] = struct.pack("<f", float("nan")); b[4:8] = struct.pack("<I", 1); b[52:56] = bytes(4)'
probe "DLRM table with a NaN weight (version-1 file)" nz "table 0 row 0 column 0 is nan: non-finite weights refused" 60 -- zt train "${DLRM[@]}" --steps 3 --resume dk
dl_make dk && dl_edit dk 'b += b"\0" * 8'
probe "DLRM table file with 8 bytes appended" nz "has bytes past its table shard" 60 -- zt train "${DLRM[@]}" --steps 3 --resume dk
dl_make dk
probe "DLRM resume of an intact checkpoint" 0 "" 60 -- zt train "${DLRM[@]}" --steps 3 --resume dk
