#!/usr/bin/env python3
"""benchmarks/gpt_vs_torch.py - the GPT that `zeroc train` builds (src/model/gpt.c), written
in PyTorch, trained on CPU ranks for the speed comparison of issue 20 (gpt_vs_torch.sh).

Model as gpt.c builds it: GPT-2 layout, learned positions, pre-LayerNorm blocks, GELU (tanh),
the logits tied to the token embedding, no dropout, no biases dropped; init N(0, 0.02), the two
output projections N(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm 1/0. Optimiser as zeroc's
defaults (src/train/trainer.c): AdamW lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0,
clip 1.0 on the global gradient norm, fp32. The LR schedule is left constant: its cost is
nil. Data: uniform random tokens (zeroc's --data synthetic), generated before the timed loop.

Ranks come from mpirun (OMPI_COMM_WORLD_RANK/SIZE); the same environment as torchrun sets
(OMP_NUM_THREADS=1 per rank) is the caller's. DDP over gloo, the optimiser state sharded by
torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO-1) when world > 1.
Prints per step `step N ms M` on rank 0 and one summary line: median of steps 4 to the last.
Runs on PyTorch 1.13 (Debian's python3-torch, which lacks scaled_dot_product_attention) and 2.x.
"""
import argparse
import math
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer


class Block(nn.Module):
    def __init__(self, C, nh):
        super().__init__()
        self.nh = nh
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0 (flash / fused on CPU)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # Debian's python3-torch 1.13: the attention written out, as nanoGPT did then
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, nh, V, T):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, nh) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for n, p in self.named_parameters():
            if n.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln_" in n or n.startswith("ln_"):
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * L) if n.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def llama(a):
    """The Llama family as zeroc's llama-tiny preset builds it (untied head, rope theta
    500000 with llama3 scaling x32, RMSNorm eps 1e-5, no biases, SwiGLU), from transformers
    (issue 39's comparison: the implementation most users train)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.ffn,
                      num_hidden_layers=a.layers, num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, max_position_embeddings=a.seq,
                      rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
                      rope_scaling={"rope_type": "llama3", "factor": 32.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192},
                      attn_implementation="sdpa")
    m = LlamaForCausalLM(cfg)

    class Wrap(nn.Module):  # (idx, targets) -> the mean loss, as GPT's forward
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, idx, targets):
            logits = self.m(input_ids=idx).logits
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

    return Wrap(m)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=["gpt2", "llama"], default="gpt2")
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=688)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29518")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1)
    if a.family == "llama":
        model = llama(a)
    else:
        model = GPT(a.layers, a.hidden, a.heads, a.vocab, a.seq)
    opt_kw = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
        opt = ZeroRedundancyOptimizer(
            model.parameters(), optimizer_class=torch.optim.AdamW, **opt_kw)
    else:
        opt = torch.optim.AdamW(model.parameters(), **opt_kw)
    g = torch.Generator().manual_seed(100 + rank)
    data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g) for _ in range(a.steps)]
    times = []
    for s in range(a.steps):
        dist.barrier()
        t0 = time.perf_counter()
        x = data[s]
        loss = model(x[:, :-1], x[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        times.append(dt)
        if rank == 0:
            print(f"step {s + 1} ms {dt * 1e3:.3f} loss {loss.item():.4f}", flush=True)
    med = statistics.median(times[3:] if len(times) > 3 else times)  # steps 4..
    if rank == 0:
        tok = a.batch * a.seq * world / med
        print(f"torch: median step {med * 1e3:.2f} ms, {tok:.0f} tokens/s over {world} ranks, "
              f"threads {torch.get_num_threads()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
