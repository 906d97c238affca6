"""What torchrun scripts around DDP often add (torchrun-style, 2 ranks): the elastic ``record``
decorator, ZeroRedundancyOptimizer, DistributedSampler without shuffling and with
drop_last, differentiable all_gather from torch.distributed.nn, comm hooks, and the
``module.`` prefix of a DDP state dict."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def rounded(t):
    return [round(v, 4) for v in t.reshape(-1).tolist()]


@record
def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"[rank {rank}] env local_rank {os.environ['LOCAL_RANK']} local_world {os.environ['LOCAL_WORLD_SIZE']}")

    data = TensorDataset(torch.arange(11, dtype=torch.float32).unsqueeze(1))
    for kwargs in ({"shuffle": False}, {"shuffle": False, "drop_last": True}, {"shuffle": True, "seed": 3}):
        sampler = DistributedSampler(data, **kwargs)
        loader = DataLoader(data, batch_size=2, sampler=sampler)
        print(f"[rank {rank}] sampler {kwargs} {len(sampler)} {[rounded(b[0]) for b in loader]}")

    # a DDP model's state dict carries the "module." prefix (PyTorch refuses SyncBatchNorm on the
    # CPU, so plain BatchNorm here: its buffers come from rank 0)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 1))
    model = DDP(net)
    torch.manual_seed(10 + rank)
    x = torch.randn(5, 4) * (rank + 1)
    model(x).sum().backward()
    print(f"[rank {rank}] bn running_mean {rounded(net[1].running_mean)} var {rounded(net[1].running_var)}")
    print(f"[rank {rank}] bn grad {rounded(net[0].weight.grad)}")
    keys = list(model.state_dict())
    print(f"[rank {rank}] ddp keys {keys[:3]} module keys {list(model.module.state_dict())[:2]}")

    # ZeRO: each rank steps its share of the parameters
    torch.manual_seed(1)
    zmodel = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)))
    zopt = ZeroRedundancyOptimizer(zmodel.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
    for step in range(3):
        torch.manual_seed(20 + 10 * rank + step)
        loss = zmodel(torch.randn(6, 4)).pow(2).mean()
        loss.backward()
        zopt.step()
        zopt.zero_grad()
        print(f"[rank {rank}] zero step {step} loss {loss.item():.5f}")
    zopt.consolidate_state_dict(to=0)
    if rank == 0:
        sd = zopt.state_dict()
        steps = [float(s["step"]) for s in sd["state"].values()]
        print(f"[rank {rank}] zero state {sorted(sd['state'])} steps {steps}")

    # comm hooks on a DDP model, and differentiable all_gather
    for hook in (default_hooks.allreduce_hook, default_hooks.fp16_compress_hook):
        torch.manual_seed(2)
        hmodel = DDP(nn.Linear(3, 2))
        hmodel.register_comm_hook(dist.group.WORLD, hook)
        torch.manual_seed(30 + rank)
        hmodel(torch.randn(4, 3)).sum().backward()
        print(f"[rank {rank}] {hook.__name__} grad {rounded(hmodel.module.weight.grad)}")
    torch.manual_seed(40 + rank)
    w = torch.randn(3, requires_grad=True)
    gathered = dist_fn.all_gather(w * 2)
    loss = sum((g * (i + 1)).sum() for i, g in enumerate(gathered))
    loss.backward()
    print(f"[rank {rank}] nn all_gather {len(gathered)} grad {rounded(w.grad)}")
    summed = dist_fn.all_reduce(w * 1.0)
    summed.sum().backward()
    print(f"[rank {rank}] nn all_reduce grad {rounded(w.grad)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
