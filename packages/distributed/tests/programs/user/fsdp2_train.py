"""FSDP2 as its tutorial writes it (torchrun-style): fully_shard each block then the root, a
MixedPrecisionPolicy, a few Adam steps, and the state dict through
torch.distributed.checkpoint.state_dict (full and sharded, get and set)."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self, dim=6, layers=2):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build(mp_policy=None):
    torch.manual_seed(0)
    model = Net()
    kwargs = {} if mp_policy is None else {"mp_policy": mp_policy}
    for block in model.blocks:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)
    return model


def r(x):
    return round(float(x), 4)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = build()
    w = model.blocks[0].fc1.weight
    print(f"[rank {rank}] type {type(w).__name__} placements {w.placements} shape {tuple(w.shape)} "
          f"local {tuple(w.to_local().shape)} is DTensor {isinstance(w, DTensor)}")
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.manual_seed(1 + rank)
    for step in range(3):
        x = torch.randn(4, 6)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"[rank {rank}] step {step} loss {loss.item():.5f}")
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    print(f"[rank {rank}] full keys {list(full)}")
    print(f"[rank {rank}] full values {[r(v.sum()) for v in full.values()]} "
          f"types {sorted({type(v).__name__ for v in full.values()})}")
    sharded = get_model_state_dict(model)
    print(f"[rank {rank}] sharded types {sorted({type(v).__name__ for v in sharded.values()})}")
    osd = get_optimizer_state_dict(model, opt, options=StateDictOptions(full_state_dict=True))
    print(f"[rank {rank}] optim state keys {sorted(osd['state'])[:3]} "
          f"param_groups {osd['param_groups'][0]['params'][:3]}")
    head = osd["state"]["head.weight"]
    print(f"[rank {rank}] exp_avg {r(head['exp_avg'].sum())} step {float(head['step'])}")

    # a fresh model takes the full state dict (broadcast from rank 0) and trains on identically
    fresh = build()
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=0.01)
    msd, _ = get_state_dict(fresh, fresh_opt)
    set_model_state_dict(fresh, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=False))
    set_state_dict(fresh, fresh_opt, model_state_dict=get_model_state_dict(fresh), optim_state_dict=osd,
                   options=StateDictOptions(full_state_dict=True))
    x = torch.randn(4, 6)
    a = model(x).pow(2).mean()
    b = fresh(x).pow(2).mean()
    a.backward()
    b.backward()
    opt.step()
    fresh_opt.step()
    same = all(torch.allclose(p.full_tensor(), q.full_tensor()) for p, q in zip(model.parameters(), fresh.parameters()))
    print(f"[rank {rank}] resumed loss {a.item():.5f} {b.item():.5f} same params after a step {same}")

    # mixed precision: bf16 compute, fp32 gradient reduction
    mp_model = build(MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
    torch.manual_seed(5)
    out = mp_model(torch.randn(4, 6))
    print(f"[rank {rank}] mp out dtype {str(out.dtype).split('.')[-1]} param dtype "
          f"{str(mp_model.head.weight.dtype).split('.')[-1]}")
    out.float().pow(2).mean().backward()
    g = mp_model.head.weight.grad
    print(f"[rank {rank}] mp grad dtype {str(g.dtype).split('.')[-1]} sum {r(g.full_tensor().sum())}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
