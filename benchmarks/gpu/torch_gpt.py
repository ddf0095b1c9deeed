"""benchmarks/gpu/torch_gpt.py - the same GPT-2 shape, or Llama preset (llama3.2-1b, ...:
RMSNorm, RoPE with llama3 scaling, GQA through SDPA's enable_gqa, SwiGLU), in PyTorch (bf16 autocast, fused
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
# the Llama family as zeroc's presets: layers, hidden, heads, kv heads, ffn, vocab, tied,
# rope theta, llama3 scaling factor (0: none)
LLAMA = {"llama3.2-1b": (16, 2048, 32, 8, 8192, 128256, True, 5e5, 32.0),
         "llama3.1-8b": (32, 4096, 32, 8, 14336, 128256, False, 5e5, 8.0),
         "qwen2.5-0.5b": (24, 896, 14, 2, 4864, 151936, True, 1e6, 0.0)}


def inv_freq(hs, theta, factor):
    """RoPE's inverse frequencies with Llama 3.1's scaling (low 1, high 4, original 8192),
    as zeroc's kernels/rope.h and transformers compute them."""
    f = [theta ** (-2.0 * i / hs) for i in range(hs // 2)]
    if factor:
        lo, hi = 8192 / 1.0, 8192 / 4.0
        out = []
        for x in f:
            w = 2 * math.pi / x
            if w > lo:
                x = x / factor
            elif w >= hi:
                sm = (8192 / w - 1.0) / (4.0 - 1.0)
                x = (1 - sm) * x / factor + sm * x
            out.append(x)
        f = out
    return torch.tensor(f, dtype=torch.float32)


def rot(x, cos, sin):  # rotate-half: pairs (i, i + hs/2)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, c, nh, nkv, ffn):
        super().__init__()
        self.nh, self.nkv, self.hs, self.ffn = nh, nkv, c // nh, ffn
        self.n1, self.n2 = nn.RMSNorm(c, eps=1e-5), nn.RMSNorm(c, eps=1e-5)
        self.qkv = nn.Linear(c, (nh + 2 * nkv) * self.hs, bias=False)
        self.o = nn.Linear(c, c, bias=False)
        self.gu = nn.Linear(c, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, c, bias=False)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        q, k, v = self.qkv(self.n1(x)).split([c, self.nkv * self.hs, self.nkv * self.hs], dim=2)
        q = rot(q.view(b, t, self.nh, self.hs).transpose(1, 2), cos, sin)
        k = rot(k.view(b, t, self.nkv, self.hs).transpose(1, 2), cos, sin)
        v = v.view(b, t, self.nkv, self.hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, c))
        g, u = self.gu(self.n2(x)).split(self.ffn, dim=2)
        return x + self.down(F.silu(g) * u)


class Llama(nn.Module):
    def __init__(self, L, c, nh, nkv, ffn, v, t, tied, theta, factor):
        super().__init__()
        self.wte = nn.Embedding(v, c)
        self.blocks = nn.ModuleList(LlamaBlock(c, nh, nkv, ffn) for _ in range(L))
        self.norm = nn.RMSNorm(c, eps=1e-5)
        self.head = None if tied else nn.Linear(c, v, bias=False)
        ang = torch.outer(torch.arange(t, dtype=torch.float32), inv_freq(c // nh, theta, factor))
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def forward(self, idx, tgt):
        x = self.wte(idx)
        t = idx.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        for blk in self.blocks:
            x = blk(x, cos, sin)
        w = self.wte.weight if self.head is None else self.head.weight
        logits = self.norm(x) @ w.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))


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
    torch.manual_seed(1)
    if a.model in LLAMA:
        L, c, nh, nkv, ffn, v, tied, theta, factor = LLAMA[a.model]
        L, c, nh = a.layers or L, a.hidden or c, a.heads or nh
        a.vocab = v
        model = Llama(L, c, nh, nkv, ffn, math.ceil(v / 64) * 64, a.seq, tied, theta,
                      factor).cuda()
    else:
        L, c, nh = PRESETS.get(a.model, (a.layers, a.hidden, a.heads))
        L, c, nh = a.layers or L, a.hidden or c, a.heads or nh
        vp = math.ceil(a.vocab / 64) * 64
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
