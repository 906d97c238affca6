"""DTensor operators as users call them on a 1-d mesh (torchrun-style, 2 or 3 ranks): the
placements PyTorch's sharding propagation picks for matmul, sums, means, softmax, views,
transposes and elementwise ops, uneven shards, from_local with run_check and an explicit
shape, redistribute between every pair of placements, autograd through them, and what each
refuses."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor


def r(t):
    return [round(v, 4) for v in t.reshape(-1).tolist()][:8]


def outcome(fn):
    try:
        result = fn()
    except Exception as err:  # noqa: BLE001 - the type is what the program prints
        return f"{type(err).__name__}"
    return result


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))

    def say(label, value):
        if isinstance(value, DTensor):
            value = f"{list(value.placements)} {tuple(value.shape)} local {tuple(value.to_local().shape)} " \
                    f"full {r(value.full_tensor())}"
        print(f"[rank {rank}] {label}: {value}")

    torch.manual_seed(0)
    a = torch.randn(6, 4)
    b = torch.randn(4, 5)
    a0, a1, ar = (distribute_tensor(a, mesh, [p]) for p in (Shard(0), Shard(1), Replicate()))
    b0, b1, br = (distribute_tensor(b, mesh, [p]) for p in (Shard(0), Shard(1), Replicate()))
    say("S0 @ R", a0 @ br)
    say("R @ S1", ar @ b1)
    say("S1 @ S0", a1 @ b0)
    say("S1 @ S0 placements only", (a1 @ b0).placements)
    say("S0 @ S1", a0 @ b1)
    say("mm", torch.mm(a0, br))
    say("matmul value ok", torch.allclose((a1 @ b0).full_tensor(), a @ b, atol=1e-5))

    say("S0 sum()", a0.sum())
    say("S0 sum(0)", a0.sum(0))
    say("S0 sum(1)", a0.sum(1))
    say("S1 sum(1, keepdim)", a1.sum(1, keepdim=True))
    # PyTorch keeps these Partial(avg) / Partial(max); ember reduces at once (docs/deviations.md)
    say("S0 mean() value", r(a0.mean().full_tensor()))
    say("S0 max() value", r(a0.max().full_tensor()))
    say("S0 amin(0) value", r(a0.amin(0).full_tensor()))
    say("S0 amax(1)", a0.amax(1))
    say("S1 softmax(0)", a1.softmax(0))
    say("S0 softmax(1)", a0.softmax(1))
    say("S0 transpose", a0.t())
    # view(3, 8) at 2 ranks: PyTorch refuses to split 3 rows unevenly, ember replicates (docs/deviations.md)
    if 2 % world == 0:  # the same uneven split at 3 ranks
        say("S0 view(2, 12)", outcome(lambda: a0.view(2, 12)))
    say("S0 view(6, 2, 2)", outcome(lambda: a0.view(6, 2, 2)))
    say("S0 flatten", outcome(lambda: a0.flatten()))
    say("S1 reshape(-1) value", r(a1.reshape(-1).full_tensor()))  # PyTorch: a private _StridedShard
    say("S0 + R", a0 + ar)
    say("S0 + S1", a0 + a1)
    say("S0 * 2 + 1", a0 * 2 + 1)
    say("S0 relu", torch.relu(a0))
    say("S0 + plain tensor", outcome(lambda: a0 + torch.ones(6, 4)))
    say("S0 + scalar tensor", a0 + torch.tensor(1.0))

    # uneven: 5 rows over the ranks
    u = torch.arange(5 * 3, dtype=torch.float32).reshape(5, 3)
    u0 = distribute_tensor(u, mesh, [Shard(0)])
    say("uneven S0", u0)
    say("uneven S0 -> S1", u0.redistribute(mesh, [Shard(1)]))
    say("uneven sum(0)", u0.sum(0))
    say("uneven mean()", u0.mean())

    # Partial sources: from_local with Partial, then every target placement
    part = DTensor.from_local(torch.full((4, 2), float(rank + 1)), mesh, [Partial()])
    say("partial", part.placements)
    say("partial -> R", part.redistribute(mesh, [Replicate()]))
    say("partial -> S0", part.redistribute(mesh, [Shard(0)]))
    say("partial -> S1", part.redistribute(mesh, [Shard(1)]))
    avg = DTensor.from_local(torch.full((2,), float(rank)), mesh, [Partial("avg")])
    say("partial avg full", r(avg.full_tensor()))
    mx = DTensor.from_local(torch.tensor([float(rank), -float(rank)]), mesh, [Partial("max")])
    say("partial max full", r(mx.full_tensor()))
    say("R -> partial", outcome(lambda: ar.redistribute(mesh, [Partial()]).to_local().sum().item()))
    say("S0 -> R -> S1", a0.redistribute(mesh, [Replicate()]).redistribute(mesh, [Shard(1)]))

    # from_local: run_check broadcasts rank 0's replica; an uneven local shard needs shape/stride
    mine = torch.full((2,), float(rank))
    checked = DTensor.from_local(mine, mesh, [Replicate()], run_check=True)
    say("from_local run_check", r(checked.to_local()))
    unchecked = DTensor.from_local(torch.full((2,), float(rank)), mesh, [Replicate()], run_check=False)
    say("from_local no check", r(unchecked.to_local()))
    local = torch.ones(3 if rank == 0 else 2, 2) * (rank + 1)
    total = 3 + 2 * (world - 1)
    given = DTensor.from_local(local, mesh, [Shard(0)], shape=torch.Size([total, 2]), stride=(2, 1))
    say("from_local shape given", given)
    guessed = DTensor.from_local(local, mesh, [Shard(0)])
    say("from_local shape guessed", tuple(guessed.shape))

    # autograd through sharded ops
    w = distribute_tensor(torch.randn(4, 3), mesh, [Shard(1)]).requires_grad_()
    x = distribute_tensor(torch.randn(6, 4), mesh, [Replicate()])
    loss = (x @ w).relu().sum()
    loss.backward()
    say("loss", loss)
    say("grad", w.grad)
    say("grad placements", w.grad.placements)

    # refusals
    say("different meshes", outcome(lambda: a0 + distribute_tensor(a, init_device_mesh("cpu", (world,)),
                                                                   [Shard(0)])))
    say("shard dim too big", outcome(lambda: distribute_tensor(a, mesh, [Shard(2)])))
    say("placements too many", outcome(lambda: distribute_tensor(a, mesh, [Shard(0), Replicate()])))
    say("matmul shapes", outcome(lambda: a0 @ a0))
    dist.barrier()
    dist.destroy_process_group()
    say("done", True)


if __name__ == "__main__":
    main()
