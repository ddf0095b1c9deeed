#!/usr/bin/env python3
"""benchmarks/dlrm_torch.py - the same DLRM in PyTorch, for samples/s side by side with
`zeroc train --model dlrm*` (benchmarks/dlrm_vs_torch.sh runs both in one invocation).

Plain PyTorch as a user would write it: nn.EmbeddingBag tables (sum pooling, replicated,
dense gradients all-reduced by DistributedDataParallel over gloo), bottom and top MLPs
with ReLU, the pairwise dot-product interaction (strict upper triangle), BCE with logits;
Adam on the MLPs and Adagrad on the tables. Launched under mpirun: the rank and world come
from Open MPI's environment. Prints one line: median step ms and samples/s over the world.
usage: mpirun -np N python dlrm_torch.py --tables 4 --rows 50,100,200,400 --dim 8 --dense 4
       --bottom 16,8 --top 32,1 --batch 32 --steps 50
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def mlp(widths, last_relu):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, rows, dim, dense, bottom, top):
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(r, dim, mode="sum") for r in rows)
        self.bottom = mlp([dense] + bottom, True)
        f = len(rows) + 1
        self.iu = torch.triu_indices(f, f, offset=1)
        self.top = mlp([dim + f * (f - 1) // 2] + top, False)

    def forward(self, dense, ids):
        z = self.bottom(dense)  # (B, D)
        emb = [t(ids[:, k:k + 1]) for k, t in enumerate(self.tables)]  # T x (B, D)
        v = torch.stack([z] + emb, dim=1)  # (B, F, D)
        dots = torch.bmm(v, v.transpose(1, 2))[:, self.iu[0], self.iu[1]]  # (B, P)
        return self.top(torch.cat([z, dots], dim=1)).squeeze(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="50,100,200,400")
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--dense", type=int, default=4)
    ap.add_argument("--bottom", default="16,8")
    ap.add_argument("--top", default="32,1")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rows = [int(x) for x in a.rows.split(",")]
    model = DLRM(rows, a.dim, a.dense, [int(x) for x in a.bottom.split(",")],
                 [int(x) for x in a.top.split(",")])
    ddp = nn.parallel.DistributedDataParallel(model)
    opt_mlp = torch.optim.Adam(list(model.bottom.parameters()) + list(model.top.parameters()),
                               lr=3e-4)
    opt_emb = torch.optim.Adagrad(model.tables.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank + 1)
    times = []
    for step in range(a.steps):
        dense = torch.randn(a.batch, a.dense, generator=g)
        ids = torch.stack([torch.randint(0, r, (a.batch,), generator=g) for r in rows], dim=1)
        label = torch.randint(0, 2, (a.batch,), generator=g).float()
        t0 = time.perf_counter()
        loss = nn.functional.binary_cross_entropy_with_logits(ddp(dense, ids), label)
        opt_mlp.zero_grad()
        opt_emb.zero_grad()
        loss.backward()
        opt_mlp.step()
        opt_emb.step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times[min(3, len(times) - 1):])
    if rank == 0:
        print(f"torch: median step {med * 1e3:.2f} ms, {a.batch * world / med:.0f} samples/s "
              f"over {world} ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
