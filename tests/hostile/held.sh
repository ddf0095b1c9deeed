# Probes that held when issue 19's hostile round was run, kept so they cannot
# come back: corrupt llm.c shards, corrupt checkpoint manifests and shard
# files, malformed safetensors, bad flags, a disk that fills during a save.
# (Dead, stopped and stuck ranks and crashes during saves are
# tests/reliability.sh's.) Sourced by tests/hostile.sh.

# llm.c token shards: header of 256 int32 (magic 20240520, version 1, count),
# then uint16 tokens.
shard() {  # shard FILE MAGIC COUNT NTOKENS_WRITTEN TOKEN
  python3 - "$@" <<'PY'
import struct, sys
f, magic, count, n, tok = sys.argv[1], *map(int, sys.argv[2:])
h = [0] * 256; h[0], h[1], h[2] = magic, 1, count
open(f, "wb").write(struct.pack("256i", *h) + struct.pack("%dH" % n, *([tok] * n if tok >= 0 else [i % 200 for i in range(n)])))
PY
}
shard good.bin 20240520 5000 5000 -1
shard badmagic.bin 1234 5000 5000 -1
shard short.bin 20240520 99999 5000 -1
shard bigtok.bin 20240520 5000 5000 65000
printf '\001\002' > hdr.bin
probe "llm.c shard: good" 0 "" 60 -- zt train "${TINY[@]}" --data good.bin
probe "llm.c shard: wrong magic" 1 "magic 1234 .* is not the llm.c token shard magic" 30 -- zt train "${TINY[@]}" --data badmagic.bin
probe "llm.c shard: count beyond the file" 1 "shorter than its header's count of 99999 tokens" 30 -- zt train "${TINY[@]}" --data short.bin
probe "llm.c shard: token >= vocab" 1 "token 65000 .* is >= vocab 256" 30 -- zt train "${TINY[@]}" --data bigtok.bin
probe "llm.c shard: 2-byte file" 1 "shorter than the 1024-byte llm.c shard header" 30 -- zt train "${TINY[@]}" --data hdr.bin
probe "llm.c shard: same corruption on 2 ranks" 1 "is not the llm.c token shard magic" 60 -- ztn 2 train "${TINY[@]}" --data badmagic.bin

# Checkpoints: one good save, then copies corrupted one way each.
probe "checkpoint: a good save" 0 "" 60 -- zt train "${TINY[@]}" --save ck --save-every 3 --export w.safetensors
SH=pp00_tp00_shard00000.bin
cp -r ck ck_trunc; truncate -s 1000 ck_trunc/step_00000003/$SH
probe "checkpoint: truncated shard file" 1 "has 1000 bytes, the manifest says" 30 -- zt train "${TINY[@]}" --steps 5 --resume ck_trunc
cp -r ck ck_flip; printf 'A' | dd of=ck_flip/step_00000003/$SH bs=1 seek=5000 conv=notrunc 2> /dev/null
probe "checkpoint: one byte flipped in a shard" 1 "fails its checksum" 30 -- zt train "${TINY[@]}" --steps 5 --resume ck_flip
cp -r ck ck_json; echo '{"step": ' > ck_json/step_00000003/manifest.json
probe "checkpoint: manifest cut short" 1 "manifest .*JSON error at byte" 30 -- zt train "${TINY[@]}" --steps 5 --resume ck_json
cp -r ck ck_gone; rm ck_gone/step_00000003/$SH
probe "checkpoint: shard file missing" 1 "$SH" 30 -- zt train "${TINY[@]}" --steps 5 --resume ck_gone
probe "checkpoint: --resume of a missing directory" nz "nowhere" 30 -- zt train "${TINY[@]}" --resume nowhere

# safetensors given to --init.
python3 -c "open('huge_hdr.safetensors','wb').write((10**12).to_bytes(8,'little')+b'{}')"
head -c 3000 w.safetensors > trunc.safetensors
probe "safetensors: header length 10^12" 1 "header length 1000000000000 is larger than" 30 -- zt train "${TINY[@]}" --init huge_hdr.safetensors
probe "safetensors: file cut short" 1 "run past the end of the data section" 30 -- zt train "${TINY[@]}" --init trunc.safetensors
probe "safetensors: the exported weights load" 0 "" 60 -- zt train "${TINY[@]}" --init w.safetensors

# Flags: exit 2 with the accepted values.
probe "flag: --zero 5" 2 "--zero '5': accepted an integer 0..3" 20 -- zt train "${TINY[@]}" --zero 5
probe "flag: --batch 0" 2 "--batch '0': accepted an integer 1..65536" 20 -- zt train "${TINY[@]}" --batch 0
probe "flag: --lr -1" 2 "--lr '-1': accepted a number" 20 -- zt train "${TINY[@]}" --lr -1
probe "flag: --model bogus" 2 "--model 'bogus': accepted tiny, small" 20 -- zt train "${TINY[@]}" --model bogus
probe "flag: --tp 3 with 4 heads" 2 "--tp 3 must divide the 4 attention heads" 20 -- zt train "${TINY[@]}" --tp 3

# A file system that fills up during the second save: the job fails naming
# the file, and `latest` still names the first, complete checkpoint.
mkdir -p full
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=2m zeroc-hostile full 2> /dev/null; then
  probe "disk full during a save" 1 "No space left on device" 60 -- zt train "${TINY[@]}" --steps 4 --save full/ck --save-every 2
  check "disk full: latest names the complete step 2" grep -qx step_00000002 full/ck/latest
  check "disk full: no staging directory left" bash -c '! ls -d full/ck/*.tmp 2> /dev/null | grep -q .'
  cp -r full/ck ck_full; umount full
  probe "disk full: that checkpoint resumes" 0 "" 60 -- zt train "${TINY[@]}" --steps 4 --resume ck_full
else
  echo "skip disk-full probes (needs root and a tmpfs mount)"
fi
probe "flag: unknown --bogus" 2 "unknown flag '--bogus'" 20 -- zt train "${TINY[@]}" --bogus
probe "flag: --steps abc" 2 "--steps 'abc'" 20 -- zt train "${TINY[@]}" --steps abc
