#!/usr/bin/env python3
"""benchmarks/hf_llama.py ZEROC WORK_DIR - the Llama family against transformers, both ways.

For each of two random small models saved with save_pretrained,
  - llama: LlamaForCausalLM, 4 layers, hidden 64, 4 heads, 2 kv heads (GQA), MLP 128,
    rope_theta 500000 with llama3 scaling (factor 8, original 64), untied head, written
    sharded (max_shard_size 100KB: model-0000k-of-0000n.safetensors + index);
  - qwen2: Qwen2ForCausalLM, the same sizes, q/k/v biases (random, not transformers'
    zeros), rope_theta 1e6, tied head, one model.safetensors;
it checks
  1. the forward loss: zeroc's step-1 loss of `zeroc train --init HF_DIR` on a batch of
     8 x 64 tokens equals transformers' on the same batch to 1e-5;
  2. 12 AdamW steps (lr 1e-3 constant, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on the
     2-D weights only, global-norm clip 1.0) equal torch.optim.AdamW's on the transformers
     model, step by step to 1e-4, in 1 rank, ZeRO-3 on 4 ranks, tp 2, pp 2, cp 2 ring and
     cp 2 Ulysses (global batch 8 in each);
  3. the 1-rank run's `--export DIR` (sharded for llama: ZEROC_EXPORT_SHARD_BYTES) loads with
     AutoModelForCausalLM.from_pretrained with no missing, unexpected or mismatched key, as
     the right class, and gives zeroc's held-out loss (its --val-data evaluation after the
     last step) to 1e-5; its weights against torch's after the same 12 steps.
Data: the bytes of Python's standard library sources (vocabulary 256), as llm.c shards.
Needs torch and transformers (pip, e.g. /tmp/hfvenv; not part of the build or CTest).
Exits 1 when a check fails.
"""
import glob, json, os, subprocess, sys

import numpy as np
import torch
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

zeroc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
T, G, STEPS, LR, WD = 64, 8, 12, 1e-3, 0.1
LAYOUTS = [("1 rank", 1, ["--batch", "8"]),
           ("ZeRO-3, 4 ranks", 4, ["--zero", "3", "--batch", "2"]),
           ("tp 2", 2, ["--tp", "2", "--batch", "8"]),
           ("pp 2 (1F1B)", 2, ["--pp", "2", "--batch", "4"]),
           ("cp 2 ring", 2, ["--cp", "2", "--batch", "8"]),
           ("cp 2 Ulysses", 2, ["--cp", "2", "--cp-mode", "ulysses", "--batch", "8"])]
torch.set_num_threads(2)


def shard(path, tok):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tok)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tok.astype(np.uint16).tobytes())


src = b"".join(open(p, "rb").read() for p in sorted(glob.glob(os.path.dirname(os.__file__) + "/*.py")))
train_tok = np.frombuffer(src[:STEPS * G * T + 1], dtype=np.uint8).astype(np.int64)
val_tok = np.frombuffer(src[-(2 * G * T + 1):], dtype=np.uint8).astype(np.int64)
shard(os.path.join(work, "train.bin"), train_tok)
shard(os.path.join(work, "val.bin"), val_tok)


def batch(tok, k):  # global batch k: sequences k*G .. k*G+G-1, sequence j = tok[j*T .. j*T+T]
    x = np.stack([tok[j * T:j * T + T] for j in range(k * G, k * G + G)])
    y = np.stack([tok[j * T + 1:j * T + T + 1] for j in range(k * G, k * G + G)])
    return torch.from_numpy(x), torch.from_numpy(y)


def loss_of(model, x, y):
    logits = model(x).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def reference(hf_dir):
    """transformers' forward loss, then 12 torch.optim.AdamW steps: losses and the model."""
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    model.train()  # no dropout in these configs
    params = [p for p in model.parameters()]
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for s in range(STEPS):
        x, y = batch(train_tok, s)
        opt.zero_grad()
        loss = loss_of(model, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
    return losses, model


def zeroc_run(hf_dir, name, np_, args, export=None, env=None):
    metrics = os.path.join(work, f"m_{name}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(np_), zeroc, "train",
           "--device", "cpu", "--init", hf_dir, "--seq", str(T), "--steps", str(STEPS),
           "--lr", str(LR), "--schedule", "constant", "--weight-decay", str(WD), "--clip", "1.0",
           "--data", os.path.join(work, "train.bin"), "--metrics", metrics, "--quiet"] + args
    if export:
        cmd += ["--export", export, "--val-data", os.path.join(work, "val.bin"),
                "--val-tokens", str(2 * G * T)]
    subprocess.run(cmd, check=True, env=dict(os.environ, ZEROC_THREADS="1", **(env or {})))
    rows = [json.loads(l) for l in open(metrics)]
    losses = [r["loss"] for r in rows if "loss" in r and r.get("step")]
    val = [r["val_loss"] for r in rows if r.get("val_loss") is not None]
    return losses[:STEPS], (val[-1] if val else None)


def randomize(model):
    """Biases and norm weights away from transformers' zeros and ones, so both are tested."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith(".bias"):
                p.normal_(0.0, 0.1)
            elif p.dim() == 1:
                p.uniform_(0.8, 1.2)
    return model


def check_model(tag, model, shard_kw, export_env):
    ok = True
    hf_dir, out_dir = os.path.join(work, tag + "_hf"), os.path.join(work, tag + "_out")
    randomize(model).save_pretrained(hf_dir, **shard_kw)
    files = sorted(os.listdir(hf_dir))
    print(f"\n== {tag}: {type(model).__name__}, save_pretrained wrote {', '.join(files)}")
    ref, trained = reference(hf_dir)
    rows = []
    for name, np_, args in LAYOUTS:
        one = np_ == 1
        got, val = zeroc_run(hf_dir, f"{tag}_{np_}_{'_'.join(args)}", np_, args,
                             export=out_dir if one else None, env=export_env if one else None)
        diff = max(abs(a - b) for a, b in zip(got, ref)) if len(got) == STEPS else float("inf")
        rows.append((name, got, diff))
        if one:
            fwd = abs(got[0] - ref[0])
            print(f"forward loss (step 1): zeroc {got[0]:.8f}, transformers {ref[0]:.8f}, "
                  f"difference {fwd:.2e}")
            ok &= fwd <= 1e-5
            one_val = val
        ok &= diff <= 1e-4
    print(f"{STEPS} AdamW steps, losses: torch {ref[0]:.5f} -> {ref[-1]:.5f}")
    for name, got, diff in rows:
        print(f"  {name:16s} zeroc {got[0]:.5f} -> {got[-1]:.5f}   max |zeroc - torch| "
              f"over the steps {diff:.2e}")
    exported = sorted(os.listdir(out_dir))
    m, info = AutoModelForCausalLM.from_pretrained(out_dir, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    print(f"export {', '.join(exported)}: from_pretrained -> {type(m).__name__}, "
          f"missing/unexpected/mismatched: {bad or 'none'}")
    ok &= not bad and type(m).__name__ == type(model).__name__
    m.eval()
    with torch.no_grad():
        hf_val = float(np.mean([loss_of(m, *batch(val_tok, k)).item() for k in range(2)]))
        wdiff = max((p - q).abs().max().item() for (n, p), (_, q)
                    in zip(sorted(m.state_dict().items()), sorted(trained.state_dict().items())))
    print(f"held-out loss: zeroc {one_val:.8f}, transformers on the export {hf_val:.8f}, "
          f"difference {abs(one_val - hf_val):.2e}; weights vs torch's after {STEPS} steps: "
          f"max |diff| {wdiff:.2e}")
    ok &= abs(one_val - hf_val) <= 1e-5
    return ok


common = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              rms_norm_eps=1e-5, bos_token_id=None, eos_token_id=None, pad_token_id=None)
torch.manual_seed(0)
llama = LlamaForCausalLM(LlamaConfig(
    **common, tie_word_embeddings=False,
    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 64}))
ok = check_model("llama", llama, {"max_shard_size": "100KB"},
                 {"ZEROC_EXPORT_SHARD_BYTES": "300000"})
torch.manual_seed(1)
qwen = Qwen2ForCausalLM(Qwen2Config(**common, tie_word_embeddings=True,
                                    rope_parameters={"rope_type": "default",
                                                     "rope_theta": 1000000.0}))
ok &= check_model("qwen2", qwen, {}, {})
print("\nall checks passed" if ok else "\nA CHECK FAILED")
sys.exit(0 if ok else 1)
