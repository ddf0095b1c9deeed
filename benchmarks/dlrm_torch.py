#!/usr/bin/env python3
"""benchmarks/dlrm_torch.py - the same DLRM in PyTorch, for samples/s side by side with
`zeroc train --model dlrm*` (benchmarks/dlrm_vs_torch.sh and dlrm_torch_rounds.sh run both).

The model is zeroc's (docs/dlrm.md): sum-pooled embedding bags (one id per table and sample,
ids drawn from the same continuous Zipf(1.2) law as zeroc's synthetic source), a bottom MLP
with ReLU on every layer, the pairwise dot-product interaction (strict upper triangle) after
the bottom output, a top MLP with ReLU on all but the last layer, BCE with logits (mean).
The MLPs take AdamW as zeroc's trainer does by default (betas 0.9/0.95, eps 1e-8, no weight
decay, global norm clipped to 1.0, cosine learning rate from 3e-4; torch's fused AdamW); the
tables take AdaGrad at the same learning rate. fp32, replicated MLPs under DDP over gloo.

--tables-grad gather (with --table-opt rowwise: the fastest version for `dlrm`):
  nn.EmbeddingBag(sparse=True), the tables left out of DDP; exchange_tables all-gathers
  every table's sparse gradient (ids and rows) in two collectives and averages it.
--tables-grad sparse (default): nn.EmbeddingBag(sparse=True) under DDP, which all-reduces
  each table's sparse gradient over gloo (one sparse all-reduce per table).
--tables-grad dense (what a naive user writes): dense table gradients, DDP all-reduces
  every table's full gradient and Adagrad touches every row.
--table-opt adagrad (default): torch.optim.Adagrad, only the touched rows with sparse
  gradients; one state per element (s += g^2; w -= lr g / (sqrt(s) + eps)) where zeroc
  keeps one per row. --table-opt rowwise: zeroc's row-wise AdaGrad
  (s_row += sum(g^2) / D) in a few tensor ops on the sparse gradient.
Tables are replicated on every rank in all three (data-parallel tables); zeroc's `auto` places
them model-parallel. Launched under mpirun: the rank and world come from Open MPI's
environment. The batches are generated before the timed loop. Prints one line: median step
ms and samples/s over the world (rank 0's steps after the first 3), and rank 0's last loss.
usage: mpirun -np N python dlrm_torch.py --rows 50,100,200,400 --dim 8 --dense 4
       --bottom 16,8 --top 32,1 --batch 32 --steps 50 [--tables-grad gather|sparse|dense]
       [--table-opt adagrad|rowwise] [--lr 3e-4]
"""
import argparse
import math
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def mlp(widths, last_relu):
    layers = []
    for i in range(len(widths) - 1):
        lin = nn.Linear(widths[i], widths[i + 1])
        # N(0, 2 / (fan_in + fan_out)) weights, zero biases, as zeroc's layers
        nn.init.normal_(lin.weight, 0.0, math.sqrt(2.0 / (widths[i] + widths[i + 1])))
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if i < len(widths) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, rows, dim, dense, bottom, top, sparse):
        super().__init__()
        self.tables = nn.ModuleList(
            nn.EmbeddingBag(r, dim, mode="sum", sparse=sparse) for r in rows)
        for t, r in zip(self.tables, rows):  # U(-1/sqrt(rows), 1/sqrt(rows)) as zeroc's
            nn.init.uniform_(t.weight, -1.0 / math.sqrt(r), 1.0 / math.sqrt(r))
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


class RowwiseAdagrad:
    """zeroc's row-wise AdaGrad on sparse gradients: per touched row,
    s += sum(g^2) / D; w -= lr g / (sqrt(s) + eps)."""

    def __init__(self, params, lr, eps=1e-8):
        self.params, self.lr, self.eps = list(params), lr, eps
        self.state = [torch.zeros(p.shape[0]) for p in self.params]

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        for p, s in zip(self.params, self.state):
            g = p.grad.coalesce()
            idx, val = g.indices()[0], g.values()
            s.index_add_(0, idx, val.pow(2).mean(1))
            p.index_add_(0, idx, val / (s[idx].sqrt() + self.eps).unsqueeze(1), alpha=-self.lr)


def exchange_tables(tables, B, world):
    """The tables' sparse gradients averaged over the ranks in two collectives for all
    tables (DDP's gloo path runs one sparse all-reduce per table): each rank's gradient
    of table t is B rows (one id per sample, not coalesced), so every rank all-gathers
    the (T, B) ids and the (T, B, D) rows and keeps the world's rows of each table."""
    grads = [t.weight.grad for t in tables]
    idx = torch.stack([g._indices()[0] for g in grads])  # (T, B)
    val = torch.stack([g._values() for g in grads])  # (T, B, D)
    T, D = val.shape[0], val.shape[2]
    assert idx.shape[1] == B, "one id per sample and table"
    idx_all = torch.empty(world * T * B, dtype=idx.dtype)
    val_all = torch.empty(world * T * B * D)
    dist.all_gather_into_tensor(idx_all, idx.reshape(-1))
    dist.all_gather_into_tensor(val_all, val.reshape(-1))
    idx_all = idx_all.view(world, T, B)
    val_all = val_all.view(world, T, B, D).div_(world)
    for k, t in enumerate(tables):
        t.weight.grad = torch.sparse_coo_tensor(idx_all[:, k].reshape(1, -1),
                                                val_all[:, k].reshape(-1, D), t.weight.shape)


def zipf(u, n, s=1.2):
    """rank of a continuous Zipf(s) law over n rows at quantile u (zeroc's src/io/clicks.c)"""
    a = 1.0 - s
    top = (n + 1.0) ** a
    r = torch.floor(((top - 1.0) * u + 1.0) ** (1.0 / a)).long() - 1
    return r.clamp(0, n - 1)


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
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--tables-grad", choices=["sparse", "gather", "dense"], default="sparse")
    ap.add_argument("--table-opt", choices=["adagrad", "rowwise"], default="adagrad")
    a = ap.parse_args()
    if a.tables_grad == "dense" and a.table_opt != "adagrad":
        ap.error("--table-opt rowwise needs --tables-grad sparse")
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.set_num_threads(a.threads)
    torch.sparse.check_sparse_tensor_invariants.disable()  # opted out: silences a warning
    torch.manual_seed(1)  # the same initial weights on every rank, as DDP broadcasts anyway
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rows = [int(x) for x in a.rows.split(",")]
    sparse = a.tables_grad != "dense"
    model = DLRM(rows, a.dim, a.dense, [int(x) for x in a.bottom.split(",")],
                 [int(x) for x in a.top.split(",")], sparse)
    if a.tables_grad == "gather":  # DDP syncs the MLPs only; exchange_tables the tables
        nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
            model, [f"tables.{k}.weight" for k in range(len(rows))])
    ddp = nn.parallel.DistributedDataParallel(model)
    mlp_params = list(model.bottom.parameters()) + list(model.top.parameters())
    # fused: one kernel over all the MLPs' tensors, about 10% faster per step here
    opt_mlp = torch.optim.AdamW(mlp_params, lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                                weight_decay=0.0, fused=True)
    if a.table_opt == "rowwise":
        opt_emb = RowwiseAdagrad(model.tables.parameters(), lr=a.lr)
    else:
        opt_emb = torch.optim.Adagrad(model.tables.parameters(), lr=a.lr, eps=1e-8)
    g = torch.Generator().manual_seed(rank + 1)
    batches = []
    for _ in range(a.steps):
        dense = torch.randn(a.batch, a.dense, generator=g)
        ids = torch.stack([zipf(torch.rand(a.batch, generator=g, dtype=torch.float64), r)
                           for r in rows], dim=1)
        label = torch.randint(0, 2, (a.batch,), generator=g).float()
        batches.append((dense, ids, label))
    times = []
    for step, (dense, ids, label) in enumerate(batches):
        t0 = time.perf_counter()
        lr = a.lr * 0.5 * (1.0 + math.cos(math.pi * step / a.steps))  # cosine, as zeroc's
        for group in opt_mlp.param_groups:
            group["lr"] = lr
        if a.table_opt == "rowwise":
            opt_emb.lr = lr
        else:
            opt_emb.param_groups[0]["lr"] = lr
        loss = nn.functional.binary_cross_entropy_with_logits(ddp(dense, ids), label)
        opt_mlp.zero_grad()
        opt_emb.zero_grad()
        loss.backward()
        if a.tables_grad == "gather":
            exchange_tables(model.tables, a.batch, world)
        torch.nn.utils.clip_grad_norm_(mlp_params, 1.0)
        opt_mlp.step()
        opt_emb.step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times[min(3, len(times) - 1):])
    if rank == 0:
        print(f"torch ({a.tables_grad} tables, {a.table_opt}): median step {med * 1e3:.2f} ms, "
              f"{a.batch * world / med:.0f} samples/s over {world} ranks, last loss {loss.item():.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
