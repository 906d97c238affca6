"""torch.distributed.checkpoint as its recipe writes it (torchrun-style): an FSDP2 model and its
optimizer saved through an app-state Stateful, then loaded into a model laid out differently
(tensor parallel, and replicated DTensors), and into plain tensors."""

import os
import shutil
import sys
import tempfile

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(5, 8)
        self.w2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(x)))


class AppState(Stateful):
    def __init__(self, model, optimizer=None):
        self.model = model
        self.optimizer = optimizer

    def state_dict(self):
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, state_dict):
        set_state_dict(self.model, self.optimizer, model_state_dict=state_dict["model"],
                       optim_state_dict=state_dict["optim"])


def sums(module):
    return [round(p.full_tensor().sum().item() if hasattr(p, "full_tensor") else p.sum().item(), 4)
            for p in module.parameters()]


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    path = os.path.join(tempfile.gettempdir(), f"dcp-user-{os.environ['MASTER_PORT']}-{os.getppid()}")
    mesh = init_device_mesh("cpu", (world,))

    torch.manual_seed(0)
    model = fully_shard(MLP(), mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    torch.manual_seed(1)
    for _ in range(2):
        model(torch.randn(4, 5)).sum().backward()
        opt.step()
        opt.zero_grad()
    saved = sums(model)
    dcp.save({"app": AppState(model, opt)}, checkpoint_id=path)
    print(f"[rank {rank}] saved {saved}")
    print(f"[rank {rank}] files {sorted(f for f in os.listdir(path) if f.endswith('.metadata'))}")

    # into tensor parallel
    torch.manual_seed(42)
    tp = parallelize_module(MLP(), mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    tp_opt = torch.optim.AdamW(tp.parameters(), lr=0.01)
    state = {"app": AppState(tp, tp_opt)}
    dcp.load(state, checkpoint_id=path)
    print(f"[rank {rank}] tensor parallel {sums(tp)} same {sums(tp) == saved}")
    x = torch.randn(4, 5)
    model(x).sum().backward()
    tp(x).sum().backward()
    opt.step()
    tp_opt.step()
    print(f"[rank {rank}] one more step same {sums(tp) == sums(model)}")

    # into DTensors replicated and sharded on the other dim, and plain tensors
    torch.manual_seed(7)
    fresh = MLP()
    sd = {
        "app": {"model": {
            "w1.weight": distribute_tensor(torch.zeros(8, 5), mesh, [Replicate()]),
            "w1.bias": distribute_tensor(torch.zeros(8), mesh, [Shard(0)]),
            "w2.weight": distribute_tensor(torch.zeros(3, 8), mesh, [Shard(1)]),
            "w2.bias": torch.zeros(3),
        }},
    }
    dcp.load(sd, checkpoint_id=path)
    m = sd["app"]["model"]
    whole = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v) for k, v in m.items()}
    print(f"[rank {rank}] resharded {[round(v.sum().item(), 4) for v in whole.values()]}")
    print(f"[rank {rank}] local shapes {[tuple(getattr(v, 'to_local', lambda v=v: v)().shape) for v in m.values()]}")
    fresh.load_state_dict(whole)
    print(f"[rank {rank}] plain model {sums(fresh)}")

    # a key the checkpoint lacks, a shape it does not have
    def load_missing():
        dcp.load({"app": {"model": {"nope": torch.zeros(2)}}}, checkpoint_id=path)

    def load_bad_shape():
        dcp.load({"app": {"model": {"w2.bias": torch.zeros(4)}}}, checkpoint_id=path)

    for label, fn in (("missing key", load_missing), ("bad shape", load_bad_shape)):
        try:
            fn()
            print(f"[rank {rank}] {label} ok")
        except BaseException as err:  # noqa: BLE001 - CheckpointException is a BaseException, as PyTorch's
            print(f"[rank {rank}] {label} {type(err).__name__}")
    dist.barrier()
    if rank == 0:
        shutil.rmtree(path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
