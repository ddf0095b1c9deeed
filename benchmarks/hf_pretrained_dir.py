#!/usr/bin/env python3
"""benchmarks/hf_pretrained_dir.py ZEROC DATA_DIR WORK_DIR [NP] - transformers
save_pretrained directories both ways through zeroc train (--init DIR, --export DIR).

1. Builds a GPT2LMHeadModel (n_positions 1024, seeded init) and save_pretrained's it.
2. `mpirun -np NP zeroc train --init HF_DIR --seq 256`: the model and the shape come
   from its config.json; fine-tunes on DATA_DIR's train shards, evaluates on its val
   shards, and exports with `--export OUT_DIR` (config.json + model.safetensors).
3. AutoModelForCausalLM.from_pretrained(OUT_DIR): the class, no missing, unexpected or
   mismatched keys, wpe's 1024 rows back; the loss on the held-out sequences zeroc
   evaluated (batch k = sequences k*G .. k*G+G-1, sequence j the T+1 tokens from token
   j*T of the concatenated val shards).
Prints both losses; exits 1 on a key problem or a difference above 1e-4. Needs torch,
transformers and safetensors (pip; not part of the build or CTest). DATA_DIR: `zeroc data
--tokenizer bytes` output (vocabulary 256).
"""
import glob, json, os, subprocess, sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

zeroc, data, work = sys.argv[1], sys.argv[2], sys.argv[3]
nproc = int(sys.argv[4]) if len(sys.argv) > 4 else 2
L, C, H, T, STEPS, BATCH, V = 4, 128, 4, 256, 40, 4, 256
os.makedirs(work, exist_ok=True)
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=V, n_positions=1024, n_embd=C, n_layer=L, n_head=H,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None,
                 eos_token_id=None)
hf_dir, out_dir = os.path.join(work, "hf"), os.path.join(work, "out")
GPT2LMHeadModel(cfg).save_pretrained(hf_dir)
metrics = os.path.join(work, "metrics.jsonl")
G = BATCH * nproc
cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(nproc), zeroc, "train",
       "--device", "cpu", "--init", hf_dir, "--seq", str(T), "--batch", str(BATCH),
       "--steps", str(STEPS), "--lr", "1e-3", "--warmup", "5",
       "--data", os.path.join(data, "train_*.bin"), "--val-data", os.path.join(data, "val_*.bin"),
       "--val-tokens", str(8 * G * T), "--export", out_dir, "--metrics", metrics, "--quiet"]
print("$", " ".join(cmd), flush=True)
subprocess.run(cmd, check=True)
rows = [json.loads(l) for l in open(metrics)]
zeroc_val = [r["val_loss"] for r in rows if r.get("val_loss") is not None][-1]

model, info = AutoModelForCausalLM.from_pretrained(out_dir, output_loading_info=True)
bad = {k: v for k, v in info.items() if v}
print(f"from_pretrained: {type(model).__name__}, n_positions {model.config.n_positions}, "
      f"missing/unexpected/mismatched: {bad or 'none'}")
ok = not bad and type(model).__name__ == "GPT2LMHeadModel" and model.config.n_positions == 1024
model.eval()
nseq = 8 * G
tok = np.concatenate([np.fromfile(p, dtype=np.uint16, offset=1024)
                      for p in sorted(glob.glob(os.path.join(data, "val_*.bin")))]).astype(np.int64)
assert len(tok) >= nseq * T + 1, f"val shards hold {len(tok)} tokens, need {nseq * T + 1}"
with torch.no_grad():
    losses = []
    for j in range(nseq):
        x = torch.from_numpy(tok[j * T:(j + 1) * T + 1])
        out = model(x[None, :T])
        losses.append(torch.nn.functional.cross_entropy(out.logits[0], x[1:]).item())
hf_val = float(np.mean(losses))
print(f"held-out loss: zeroc {zeroc_val:.6f}, transformers from_pretrained(OUT_DIR) {hf_val:.6f}, "
      f"difference {abs(zeroc_val - hf_val):.2e}")
sys.exit(0 if ok and abs(zeroc_val - hf_val) < 1e-4 else 1)
