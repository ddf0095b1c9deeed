#!/usr/bin/env python3
"""benchmarks/hf_seq_roundtrip.py ZEROC - offline check with Hugging Face `transformers`
(not part of the build or CTest), run in a scratch directory: a GPT2LMHeadModel of 1024
positions saved with save_pretrained (`transformer.` names, no lm_head) goes through
`zeroc train --seq 256 --steps 0 --init ... --export ...`; the export keeps all 1024
position rows, loads into transformers with no missing or unexpected tensor, and gives
the same loss on 256 bytes of a Debian license text."""
import subprocess
import sys

import torch
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel

Z = sys.argv[1]
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=256, n_positions=1024, n_embd=64, n_layer=2, n_head=4,
                 resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
m = GPT2LMHeadModel(cfg).eval()
m.save_pretrained("hf", safe_serialization=True)
text = open("/usr/share/common-licenses/GPL-3", "rb").read()[:4000]
ids = torch.tensor([list(text[:256])])


def loss(model):
    with torch.no_grad():
        return float(model(ids, labels=ids).loss)


print("transformers loss of the saved model", loss(m))
flags = ["--model", "custom", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab",
         "256", "--seq", "256"]
subprocess.run([Z, "train", *flags, "--steps", "0", "--init", "hf/model.safetensors",
                "--export", "same.safetensors", "--quiet"], check=True)
sd = load_file("same.safetensors")
m2 = GPT2LMHeadModel(cfg).eval()
missing, unexpected = m2.transformer.load_state_dict(sd, strict=False)
missing = [k for k in missing if not k.endswith("attn.bias")]  # buffers, not weights
m2.tie_weights()
print("export: missing", missing, "unexpected", unexpected, "wpe rows", sd["wpe.weight"].shape[0])
print("transformers loss of zeroc's export", loss(m2))
