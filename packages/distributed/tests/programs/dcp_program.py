"""Distributed checkpoint: saved by one world (FSDP-sharded model + Adam state), loaded by a world
of another size with another layout (argv[1] = "save" or "load"; DCP_DIR is the checkpoint).

save: train 2 steps, save {"model", "optim", "extra"} with dcp.save; rank 0 also writes the full
      tensors as the reference (reference.json).
load: build the model sharded differently (FSDP over this world for the first layers, tensor
      parallel for the last), load the checkpoint into get_state_dict's dicts, set_state_dict,
      and compare the full parameters and optimizer moments with the reference.
"""

import json
import os
import sys

from prelude import LIB, init, torch, write

if LIB == "torch":
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
else:
    import ember.distributed.checkpoint as dcp
    from ember.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
    from ember.distributed.device_mesh import init_device_mesh
    from ember.distributed.fsdp import fully_shard
    from ember.distributed.tensor import DTensor, Replicate
    from ember.distributed.tensor.parallel import ColwiseParallel, parallelize_module

nn = torch.nn
rank, world = init()
phase, where = sys.argv[1], os.environ["DCP_DIR"]
mesh = init_device_mesh("cpu", (world,))


def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 7), nn.Tanh(), nn.Linear(7, 5))


def full(v):
    return v.full_tensor() if isinstance(v, DTensor) else v


R = {}
if phase == "save":
    model = make()
    for i in (0, 2, 4):
        fully_shard(model[i], mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    torch.manual_seed(1)
    x, y = torch.randn(8, 6), torch.randn(8, 5)
    for _ in range(2):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd, "extra": {"epoch": 3, "tag": "run-1"}}, checkpoint_id=where)
    full_msd, full_osd = get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True))
    if rank == 0:
        ref = {"model": {k: v.tolist() for k, v in full_msd.items()},
               "exp_avg": {k: full(v["exp_avg"]).tolist() for k, v in full_osd["state"].items()},
               "step": {k: float(full(v["step"])) for k, v in full_osd["state"].items()}}
        with open(os.path.join(where, "reference.json"), "w") as f:
            json.dump(ref, f)
    R["files"] = sorted(n for n in os.listdir(where) if n != "reference.json")
else:
    model = make()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()  # nothing of the saved values may come from the initialisation
    parallelize_module(model[4], mesh, ColwiseParallel(output_layouts=Replicate()))
    for i in (0, 2):
        fully_shard(model[i], mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd, "extra": {"epoch": 0, "tag": ""}}
    dcp.load(state, checkpoint_id=where)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    with open(os.path.join(where, "reference.json")) as f:
        ref = json.load(f)
    got = {k: full(v) for k, v in model.state_dict().items()}
    R["model"] = all(bool(torch.allclose(got[k], torch.tensor(v))) for k, v in ref["model"].items())
    _, osd = get_state_dict(model, opt)
    R["exp_avg"] = all(bool(torch.allclose(full(osd["state"][k]["exp_avg"]), torch.tensor(v)))
                       for k, v in ref["exp_avg"].items())
    R["step"] = all(float(full(osd["state"][k]["step"])) == v for k, v in ref["step"].items())
    R["extra"] = state["extra"]
    R["layouts"] = [str(model[0].weight.placements[0]), str(model[4].weight.placements[0])]
    missing = {"model": {**msd, "not.there": torch.zeros(2)}}
    try:
        dcp.load(missing, checkpoint_id=where)
        R["missing_key"] = "ok"
    except BaseException as err:  # PyTorch's CheckpointException is a BaseException
        R["missing_key"] = [type(err).__name__, "Missing key in checkpoint state_dict: model.not.there." in str(err)]
write(rank, R)
