# benchmarks/gpt_shape.sh - sourced by gpt_vs_torch.sh and gpt_profile.sh: the GPT shape of a
# run from the environment, so both scripts measure the same model. Sets L H NH V T B and the
# array SHAPE (zeroc train's / gpt_vs_torch.py's flags).
#   PRESET=small (4 128 4 512 128 4) | gpt2-124m (12 768 12 50257 1024 1) | unset: issue 20's
#   GPT (4 256 4 4096 128 8); LAYERS HIDDEN HEADS VOCAB SEQ BATCH override any of them.
case ${PRESET:-} in
  small) : "${LAYERS:=4}" "${HIDDEN:=128}" "${HEADS:=4}" "${VOCAB:=512}" "${SEQ:=128}" "${BATCH:=4}" ;;
  gpt2-124m) : "${LAYERS:=12}" "${HIDDEN:=768}" "${HEADS:=12}" "${VOCAB:=50257}" "${SEQ:=1024}" "${BATCH:=1}" ;;
  "") ;;
  *) echo "PRESET '$PRESET' unknown; accepted: small, gpt2-124m (or set LAYERS HIDDEN HEADS VOCAB SEQ BATCH)" >&2; exit 2 ;;
esac
L=${LAYERS:-4} H=${HIDDEN:-256} NH=${HEADS:-4} V=${VOCAB:-4096} T=${SEQ:-128} B=${BATCH:-8}
SHAPE=(--layers "$L" --hidden "$H" --heads "$NH" --vocab "$V" --seq "$T" --batch "$B")
