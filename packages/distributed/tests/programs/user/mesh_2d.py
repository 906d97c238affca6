"""A 2-d DeviceMesh (4 ranks, torchrun-style): named dims, sub-meshes, their groups and
coordinates, collectives along one dim, a DTensor sharded on one dim and replicated on the
other, HSDP-style DDP over the "dp" dim, and the mesh's refusals."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.nn.parallel import DistributedDataParallel as DDP


def outcome(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the type is what the program prints
        return type(err).__name__
    return "ok"


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh["dp"], mesh["tp"]
    print(f"[rank {rank}] mesh {mesh.shape} ndim {mesh.ndim} size {mesh.size()} coordinate {mesh.get_coordinate()}")
    print(f"[rank {rank}] dp {dp.shape} local {mesh.get_local_rank('dp')} tp local {mesh.get_local_rank('tp')} "
          f"sub mesh list {dp.mesh.tolist()} {tp.mesh.tolist()}")
    print(f"[rank {rank}] group sizes {dist.get_world_size(mesh.get_group('dp'))} "
          f"{dist.get_world_size(tp.get_group())} group ranks {dist.get_process_group_ranks(mesh.get_group('tp'))}")
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mesh.get_group("tp"))
    u = torch.tensor([float(rank)])
    dist.all_reduce(u, group=dp.get_group())
    print(f"[rank {rank}] sum over tp {t.item()} over dp {u.item()}")
    gathered = [torch.zeros(1) for _ in range(2)]
    dist.all_gather(gathered, torch.tensor([rank * 10.0]), group=mesh.get_group(1))
    print(f"[rank {rank}] all_gather over dim 1 {[g.item() for g in gathered]}")
    torch.manual_seed(0)
    big = torch.randn(4, 6)
    d = distribute_tensor(big, mesh, [Replicate(), Shard(1)])
    print(f"[rank {rank}] dtensor local {tuple(d.to_local().shape)} placements {d.placements} "
          f"full ok {torch.equal(d.full_tensor(), big)}")
    d2 = d.redistribute(mesh, [Shard(0), Shard(1)])
    values = [round(v, 4) for v in d2.to_local().reshape(-1).tolist()]
    print(f"[rank {rank}] redistributed local {tuple(d2.to_local().shape)} {values}")
    flat = mesh["dp", "tp"]
    print(f"[rank {rank}] both dims {flat.shape} {flat.mesh_dim_names}")

    torch.manual_seed(1)
    model = DDP(nn.Linear(4, 2), device_mesh=dp)
    torch.manual_seed(10 + rank)
    model(torch.randn(3, 4)).sum().backward()
    print(f"[rank {rank}] hsdp-style grad {[round(v, 4) for v in model.module.weight.grad.reshape(-1).tolist()]}")

    print(f"[rank {rank}] bad dim name {outcome(lambda: mesh['pp'])}")
    print(f"[rank {rank}] bad shape {outcome(lambda: init_device_mesh('cpu', (3, 2)))}")
    print(f"[rank {rank}] get_group without dim {outcome(lambda: mesh.get_group())}")
    duplicate = outcome(lambda: init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "a")))
    print(f"[rank {rank}] duplicate names {duplicate}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
