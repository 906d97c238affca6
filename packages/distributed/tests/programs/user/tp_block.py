"""The tensor-parallel tutorial's pattern on a small transformer block (torchrun-style, 2 ranks):
ColwiseParallel q/k/v and up-projection, RowwiseParallel output projections, SequenceParallel
norms with PrepareModuleInput, and loss_parallel on a vocabulary-sharded head; trained beside the
same block on one rank."""

import copy
import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)

DIM, HEADS, VOCAB = 8, 2, 10


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)
        self.n_heads = HEADS

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        # -1 heads: under tensor parallelism each rank holds n_heads / tp of them
        q, k, v = (t.view(b, s, -1, DIM // HEADS).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (DIM // HEADS) ** 0.5, dim=-1)
        out = (att @ v).transpose(1, 2).reshape(b, s, -1)
        return self.wo(out)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.attention_norm = nn.LayerNorm(DIM)
        self.attention = Attention()
        self.ffn_norm = nn.LayerNorm(DIM)
        self.w1 = nn.Linear(DIM, 4 * DIM)
        self.w2 = nn.Linear(4 * DIM, DIM)
        self.norm = nn.LayerNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        h = self.tok(tokens)
        h = h + self.attention(self.attention_norm(h))
        h = h + self.w2(F.relu(self.w1(self.ffn_norm(h))))
        return self.output(self.norm(h))


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    ref = Block()
    tp = copy.deepcopy(ref)
    plan = {
        "tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "w1": ColwiseParallel(input_layouts=Shard(1)),
        "w2": RowwiseParallel(output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), use_local_output=False),
    }
    parallelize_module(tp, mesh, plan)
    wq = tp.attention.wq.weight
    print(f"[rank {rank}] wq {wq.placements} local {tuple(wq.to_local().shape)} norm {tp.norm.weight.placements}")
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.2)
    opt_tp = torch.optim.SGD(tp.parameters(), lr=0.2)
    for step in range(3):
        torch.manual_seed(10 + step)
        tokens = torch.randint(0, VOCAB, (2, 4))
        labels = torch.randint(0, VOCAB, (2, 4))
        a = F.cross_entropy(ref(tokens).flatten(0, 1), labels.flatten())
        logits = tp(tokens)
        with loss_parallel():
            b = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
            b.backward()
        a.backward()
        if step == 0:
            print(f"[rank {rank}] logits placements {logits.placements} loss type {type(b).__name__}")
        opt_ref.step()
        opt_tp.step()
        opt_ref.zero_grad()
        opt_tp.zero_grad()
        b_value = b.full_tensor().item() if hasattr(b, "full_tensor") else b.item()
        print(f"[rank {rank}] step {step} ref {a.item():.5f} tp {b_value:.5f}")
    worst = max((p.full_tensor() - q).abs().max().item() for p, q in zip(tp.parameters(), ref.parameters()))
    print(f"[rank {rank}] parameters agree within 1e-5: {worst < 1e-5}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
