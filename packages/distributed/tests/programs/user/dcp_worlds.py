"""A distributed checkpoint written by one world size and read by another, as a job restarted on
fewer (or more) machines reads it (torchrun-style). argv[2]: "save" or "load"; argv[3]: the
checkpoint's folder (one per library: the formats differ). "save": an FSDP2 model trained a
step with Adam, its state saved with dcp.async_save (waited on) and a plain dict of DTensors
with dcp.save. "load": the same model at this world size restored through set_state_dict
(optimizer too) and trained one more step; the DTensors read into other placements; a
checkpoint_id that holds nothing."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor


def r(x):
    return round(float(x), 4)


def model_and_optimizer(mesh):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 3))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=0.05)


def step(model, opt, seed):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return r(loss)


def main():
    phase, folder = sys.argv[2], os.path.join(sys.argv[3], os.environ.get("DIST_LIB", "ember"))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))

    def say(label, value):
        print(f"[rank {rank}] {label}: {value}")

    model, opt = model_and_optimizer(mesh)
    if phase == "save":
        # every rank sees the same data: the losses do not depend on the world size
        say("loss", step(model, opt, 1))
        model_sd, optim_sd = get_state_dict(model, opt)
        future = dcp.async_save({"model": model_sd, "optim": optim_sd}, checkpoint_id=os.path.join(folder, "train"))
        future.result()
        say("async_save done", future.done())
        table = torch.arange(7 * 4, dtype=torch.float32).reshape(7, 4)
        tables = {"rows": distribute_tensor(table, mesh, [Shard(0)]),
                  "cols": distribute_tensor(table, mesh, [Shard(1)])}
        dcp.save({**tables, "step": 3}, checkpoint_id=os.path.join(folder, "tables"))
        say("saved", sorted(os.listdir(folder)))
    else:
        model_sd, optim_sd = get_state_dict(model, opt)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=os.path.join(folder, "train"))
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        say("restored sums", [r(p.full_tensor().sum()) for p in model.parameters()])
        say("restored exp_avg", r(opt.state[next(iter(model.parameters()))]["exp_avg"].full_tensor().sum()))
        say("next loss", step(model, opt, 2))
        want = torch.arange(7 * 4, dtype=torch.float32).reshape(7, 4)
        into = {"rows": distribute_tensor(torch.zeros(7, 4), mesh, [Shard(1)]),
                "cols": distribute_tensor(torch.zeros(7, 4), mesh, [Replicate()]), "step": 0}
        dcp.load(into, checkpoint_id=os.path.join(folder, "tables"))
        say("rows into Shard(1)", [tuple(into["rows"].to_local().shape), torch.equal(into["rows"].full_tensor(), want)])
        say("cols into Replicate", torch.equal(into["cols"].to_local(), want))
        say("step", into["step"])
        try:
            dcp.load({"rows": torch.zeros(7, 4)}, checkpoint_id=os.path.join(folder, "nothing"))
            say("empty folder", "ok")
        except BaseException as err:  # noqa: BLE001 - PyTorch's CheckpointException is a BaseException
            inner = [f"{type(e).__name__}: {str(e)[:16]}" for e, _ in getattr(err, "failures", {}).values()]
            say("empty folder", f"{type(err).__name__} {sorted(set(inner))}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
