#!/usr/bin/env python3
"""benchmarks/hf_finetune.py ZEROC DATA_DIR WORK_DIR [NP] - a transformers GPT-2 checkpoint,
fine-tuned by zeroc at a shorter context, and back.

1. Builds a GPT2LMHeadModel (n_positions 1024, seeded init) and writes it with
   save_pretrained (names prefixed `transformer.`, the tied lm_head left out).
2. Fine-tunes it with `mpirun -np NP zeroc train --init .../model.safetensors --seq 256`
   on DATA_DIR's train shards, evaluating on its val shards (--val-every), and exports.
3. Loads the export into a fresh GPT2LMHeadModel (strict: every weight present, wpe's
   1024 rows back), and computes the loss on the same held-out sequences zeroc evaluated:
   without --shuffle, evaluation batch k takes sequences k*G .. k*G+G-1, sequence j being
   the T+1 tokens from token j*T of the concatenated val shards.
Prints both losses and their difference; exits 1 if they differ by more than 1e-4.
Needs torch, transformers and safetensors (pip; not part of the build or CTest); the
vocabulary comes from DATA_DIR's tokenizer.json (written by `zeroc data`). Results:
benchmarks/RESULTS.md, "A transformers checkpoint fine-tuned at a shorter context".
"""
import glob, json, os, subprocess, sys

import numpy as np
import torch
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel

zeroc, data, work = sys.argv[1], sys.argv[2], sys.argv[3]
nproc = int(sys.argv[4]) if len(sys.argv) > 4 else 2
L, C, H, T, STEPS, VAL_EVERY = 4, 128, 4, 256, 60, 20
BATCH = 4  # per rank; global batch G = BATCH * nproc
os.makedirs(work, exist_ok=True)

vocab, eot = 256, None
tj = os.path.join(data, "tokenizer.json")
if os.path.exists(tj):
    with open(tj) as f:
        j = json.load(f)
    if j.get("model", {}).get("vocab"):
        ids = list(j["model"]["vocab"].values()) + [t["id"] for t in j.get("added_tokens", [])]
        vocab = max(ids) + 1
        eot = next((t["id"] for t in j.get("added_tokens", []) if t["content"] == "<|endoftext|>"),
                   None)

torch.manual_seed(0)
cfg = GPT2Config(vocab_size=vocab, n_positions=1024, n_embd=C, n_layer=L, n_head=H,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=eot,
                 eos_token_id=eot)
hf_dir = os.path.join(work, "hf")
GPT2LMHeadModel(cfg).save_pretrained(hf_dir)
src = os.path.join(hf_dir, "model.safetensors")
names = sorted(load_file(src).keys())
print(f"save_pretrained wrote {len(names)} tensors, e.g. {names[0]}; "
      f"lm_head.weight {'present' if 'lm_head.weight' in names else 'absent'}")

export = os.path.join(work, "export.safetensors")
metrics = os.path.join(work, "metrics.jsonl")
cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(nproc), zeroc, "train",
       "--device", "cpu", "--model", "custom", "--layers", str(L), "--hidden", str(C),
       "--heads", str(H), "--vocab", str(vocab), "--seq", str(T), "--batch", str(BATCH),
       "--steps", str(STEPS), "--lr", "1e-3", "--warmup", "5", "--init", src,
       "--data", os.path.join(data, "train_*.bin"), "--val-data", os.path.join(data, "val_*.bin"),
       "--val-every", str(VAL_EVERY), "--val-tokens", str(8 * BATCH * nproc * T),
       "--export", export, "--metrics", metrics]
print("$", " ".join(cmd), flush=True)
subprocess.run(cmd, check=True)

rows = [json.loads(l) for l in open(metrics)]
vals = [(r["step"], r["val_loss"]) for r in rows if r.get("val_loss") is not None]
print("zeroc validation loss by step:", ", ".join(f"{s}: {v:.4f}" for s, v in vals))
zeroc_val = vals[-1][1]

model = GPT2LMHeadModel(cfg)
sd = load_file(export)
assert sd["wpe.weight"].shape[0] == 1024, f"export's wpe has {sd['wpe.weight'].shape[0]} rows"
missing, unexpected = model.transformer.load_state_dict(sd, strict=False)
missing = [m for m in missing if not m.endswith(".attn.bias") and not m.endswith("masked_bias")]
assert not missing and not unexpected, f"missing {missing}, unexpected {unexpected}"
model.eval()

G = BATCH * nproc
nseq = 8 * G  # --val-tokens / T sequences: 8 global batches
tok = np.concatenate([np.fromfile(p, dtype=np.uint16, offset=1024)
                      for p in sorted(glob.glob(os.path.join(data, "val_*.bin")))]).astype(np.int64)
assert len(tok) >= nseq * T + 1, f"val shards hold {len(tok)} tokens, need {nseq * T + 1}"
with torch.no_grad():
    losses = []
    for j in range(nseq):
        x = torch.from_numpy(tok[j * T:(j + 1) * T + 1])
        out = model(x[None, :T], labels=None)
        losses.append(torch.nn.functional.cross_entropy(out.logits[0], x[1:]).item())
hf_val = float(np.mean(losses))
print(f"held-out loss: zeroc {zeroc_val:.6f}, transformers on the export {hf_val:.6f}, "
      f"difference {abs(zeroc_val - hf_val):.2e}")
sys.exit(0 if abs(zeroc_val - hf_val) < 1e-4 else 1)
