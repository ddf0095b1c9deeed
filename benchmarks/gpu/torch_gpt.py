"""benchmarks/gpu/torch_gpt.py - the same GPT-2 shape in PyTorch (bf16 autocast, fused
AdamW, scaled_dot_product_attention), timed with CUDA events; prints the median
tokens/s of the steps after warm-up and the peak allocated bytes as its last line
("TOKENS_PER_S PEAK_BYTES"). --compile times the torch.compile'd model. Written for zeroc's side-by-side
comparison; takes zeroc train's model flags (--model, --layers, --hidden, --heads,
--vocab, --seq, --batch, --steps)."""
import argparse
import math
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {"gpt2-124m": (12, 768, 12), "gpt2-350m": (24, 1024, 16), "gpt2-774m": (36, 1280, 20),
           "gpt2-1558m": (48, 1600, 25)}


class Block(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.nh = nh
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.fc, self.fcproj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, c // self.nh).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, c, nh, v, t):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(v, c), nn.Embedding(t, c)
        self.blocks = nn.ModuleList(Block(c, nh) for _ in range(L))
        self.lnf = nn.LayerNorm(c)

    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="gpt2-124m")
    for k in ("layers", "hidden", "heads"):
        p.add_argument("--" + k, type=int)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--compile", action="store_true")
    a, _ = p.parse_known_args()
    L, c, nh = PRESETS.get(a.model, (a.layers, a.hidden, a.heads))
    L, c, nh = a.layers or L, a.hidden or c, a.heads or nh
    vp = math.ceil(a.vocab / 64) * 64
    torch.manual_seed(1)
    model = GPT(L, c, nh, vp, a.seq).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    step_model = torch.compile(model) if a.compile else model
    idx = torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda")
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda")
    times = []
    for _ in range(a.steps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    print(f"{a.batch * a.seq / statistics.median(times[5:]):.0f} {torch.cuda.max_memory_allocated()}")


if __name__ == "__main__":
    main()
