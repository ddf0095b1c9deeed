# Input files a user can get wrong (sourced by tests/hostile.sh; see probe
# there): weights with NaN or infinity, FIFOs where a file is read, outputs
# that cannot be written, and the messages that name what is wrong.

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
