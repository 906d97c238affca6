"""DTensor and tensor parallelism as their tutorials write them (torchrun-style): distribute_tensor
with Shard/Replicate, Partial through from_local, redistribute, full_tensor, distribute_module with
a partition function, and ColwiseParallel/RowwiseParallel on an MLP trained beside a plain copy."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_module, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


def r(t):
    return [round(v, 4) for v in t.reshape(-1).tolist()]


def outcome(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the type is what the program prints
        return type(err).__name__
    return "ok"


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(8, 16)
        self.w2 = nn.Linear(16, 8)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(x)))


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    print(f"[rank {rank}] mesh {mesh.shape} {mesh.mesh_dim_names} local rank {mesh.get_local_rank()}")

    torch.manual_seed(0)
    big = torch.randn(6, 4)
    rows = distribute_tensor(big, mesh, [Shard(0)])
    cols = distribute_tensor(big, mesh, [Shard(1)])
    rep = distribute_tensor(big, mesh, [Replicate()])
    print(f"[rank {rank}] rows local {tuple(rows.to_local().shape)} {r(rows.to_local())}")
    print(f"[rank {rank}] cols local {tuple(cols.to_local().shape)} placements {cols.placements}")
    print(f"[rank {rank}] repr placement {rows.placements[0]!r} {Shard(1)} {Replicate()} {Partial()}")
    moved = rows.redistribute(mesh, [Shard(1)])
    print(f"[rank {rank}] row->col equal {torch.equal(moved.to_local(), cols.to_local())}")
    print(f"[rank {rank}] full equal {torch.equal(cols.full_tensor(), big)} "
          f"rep local equal {torch.equal(rep.to_local(), big)}")

    partial = DTensor.from_local(torch.ones(2, 2) * (rank + 1), mesh, [Partial()])
    print(f"[rank {rank}] partial full {r(partial.full_tensor())}")
    print(f"[rank {rank}] partial->shard {r(partial.redistribute(mesh, [Shard(0)]).to_local())}")
    avg = DTensor.from_local(torch.ones(2) * (rank + 1), mesh, [Partial("avg")])
    print(f"[rank {rank}] partial avg {r(avg.full_tensor())}")

    # ops on DTensors
    y = (rows * 2 + 1).sum(dim=0)
    print(f"[rank {rank}] sum dim0 placements {y.placements} value {r(y.full_tensor())}")
    mm = rows @ rep.T
    print(f"[rank {rank}] matmul placements {mm.placements} shape {tuple(mm.shape)} {r(mm.full_tensor()[:2])}")
    uneven = distribute_tensor(torch.arange(5.0), mesh, [Shard(0)])
    print(f"[rank {rank}] uneven shard {tuple(uneven.to_local().shape)}")
    print(f"[rank {rank}] mesh mismatch add {outcome(lambda: rows + torch.ones(6, 4))}")

    # distribute_module: shard every Linear's weight on dim 0
    def shard_params(name, module, device_mesh):
        for pname, param in list(module.named_parameters(recurse=False)):
            module.register_parameter(pname, nn.Parameter(distribute_tensor(param, device_mesh, [Shard(0)])))

    torch.manual_seed(3)
    dm = distribute_module(MLP(), mesh, shard_params)
    kinds = [(n, p.placements[0].__class__.__name__) for n, p in dm.named_parameters()]
    print(f"[rank {rank}] distribute_module {kinds}")

    # tensor parallel MLP against a plain one
    torch.manual_seed(1)
    ref = MLP()
    torch.manual_seed(1)
    tp = parallelize_module(MLP(), mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    print(f"[rank {rank}] tp w1 {tp.w1.weight.placements} local {tuple(tp.w1.weight.to_local().shape)} "
          f"w2 {tp.w2.weight.placements} bias {tp.w2.bias.placements}")
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_tp = torch.optim.SGD(tp.parameters(), lr=0.1)
    for step in range(3):
        torch.manual_seed(100 + step)
        x = torch.randn(5, 8)
        a = ref(x).pow(2).mean()
        b = tp(x).pow(2).mean()
        a.backward()
        b.backward()
        opt_ref.step()
        opt_tp.step()
        opt_ref.zero_grad()
        opt_tp.zero_grad()
        out = tp(x)
        plain = isinstance(out, torch.Tensor) and not isinstance(out, DTensor)
        print(f"[rank {rank}] step {step} ref {a.item():.5f} tp {b.item():.5f} plain tensor out {plain}")
    diff = max((p.full_tensor() - q).abs().max().item() for p, q in zip(tp.parameters(), ref.parameters()))
    print(f"[rank {rank}] max param diff below 1e-5: {diff < 1e-5}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
