"""PyTorch's "Getting Started with Distributed Data Parallel" tutorial as its readers write it:
``mp.spawn`` of a ``demo_basic`` with setup/cleanup over MASTER_ADDR/PORT, the checkpoint demo
(rank 0 saves, a barrier, every rank loads with ``map_location``), then DDP options the
tutorial and the DDP notes use (``static_graph``, gradient accumulation under ``no_sync``,
``find_unused_parameters``); each rank writes its final parameters to $DIST_OUT. argv: the port."""

import os
import sys
import tempfile

if os.environ.get("DIST_LIB", "ember") == "torch":
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    import torch.optim as optim
    from torch.nn.parallel import DistributedDataParallel as DDP
else:
    import ember as torch
    import ember.distributed as dist
    import ember.multiprocessing as mp
    import ember.nn as nn
    import ember.optim as optim
    from ember.nn.parallel import DistributedDataParallel as DDP


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = sys.argv[1]
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(10, 10)
        self.head_a = nn.Linear(10, 5)
        self.head_b = nn.Linear(10, 5)

    def forward(self, x, use_a=True):
        h = torch.relu(self.body(x))
        return self.head_a(h) if use_a else self.head_b(h)


def params(model):
    return [p.detach().reshape(-1).tolist() for p in model.parameters()]


def demo(rank, world_size, out_dir):
    setup(rank, world_size)
    report = {}

    # demo_basic
    torch.manual_seed(0)
    model = ToyModel()
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    torch.manual_seed(100 + rank)
    optimizer.zero_grad()
    outputs = ddp_model(torch.randn(20, 10))
    labels = torch.randn(20, 5)
    loss_fn(outputs, labels).backward()
    optimizer.step()
    report["basic"] = params(ddp_model)

    # demo_checkpoint
    path = os.path.join(out_dir, "model.checkpoint")
    if rank == 0:
        torch.save(ddp_model.state_dict(), path)
    dist.barrier()
    map_location = {"cuda:0": f"cuda:{rank}"}  # the tutorial's mapping (no CUDA tensors here)
    torch.manual_seed(1)
    restored = DDP(ToyModel())
    restored.load_state_dict(torch.load(path, map_location=map_location, weights_only=True))
    report["checkpoint_equal"] = params(restored) == params(ddp_model)
    optimizer = optim.SGD(restored.parameters(), lr=0.001)
    optimizer.zero_grad()
    loss_fn(restored(torch.randn(20, 10)), torch.randn(20, 5)).backward()
    optimizer.step()
    report["checkpoint_step"] = params(restored)
    dist.barrier()
    if rank == 0:
        os.remove(path)

    # static_graph, several steps
    torch.manual_seed(2)
    static = DDP(ToyModel(), static_graph=True)
    optimizer = optim.Adam(static.parameters(), lr=0.01)
    for step in range(4):
        torch.manual_seed(200 + 10 * rank + step)
        optimizer.zero_grad()
        loss_fn(static(torch.randn(8, 10)), torch.randn(8, 5)).backward()
        optimizer.step()
    report["static_graph"] = params(static)

    # static_graph with a parameter the loss never uses (no find_unused_parameters needed)
    torch.manual_seed(5)
    fixed = DDP(TwoHeads(), static_graph=True)
    optimizer = optim.SGD(fixed.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        torch.manual_seed(500 + 10 * rank + step)
        optimizer.zero_grad()
        loss_fn(fixed(torch.randn(6, 10)), torch.randn(6, 5)).backward()
        optimizer.step()
    report["static_graph_unused"] = params(fixed)
    report["static_graph_unused_grad"] = fixed.module.head_b.weight.grad is None

    # gradient accumulation: no_sync for all but the last micro-batch
    torch.manual_seed(3)
    accum = DDP(ToyModel(), bucket_cap_mb=1)
    optimizer = optim.SGD(accum.parameters(), lr=0.05, momentum=0.9)
    for step in range(2):
        optimizer.zero_grad()
        torch.manual_seed(300 + 10 * rank + step)
        batches = [(torch.randn(4, 10), torch.randn(4, 5)) for _ in range(3)]
        with accum.no_sync():
            for x, y in batches[:-1]:
                loss_fn(accum(x), y).backward()
        loss_fn(accum(batches[-1][0]), batches[-1][1]).backward()
        optimizer.step()
    report["no_sync_accumulation"] = params(accum)

    # find_unused_parameters: a head used on some steps only
    torch.manual_seed(4)
    heads = DDP(TwoHeads(), find_unused_parameters=True)
    optimizer = optim.SGD(heads.parameters(), lr=0.1)
    for step in range(3):
        torch.manual_seed(400 + 10 * rank + step)
        optimizer.zero_grad()
        loss_fn(heads(torch.randn(6, 10), use_a=step != 1), torch.randn(6, 5)).backward()
        optimizer.step()
    report["find_unused"] = params(heads)

    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        import json

        json.dump(report, f)
    cleanup()


if __name__ == "__main__":
    world_size = 2
    out = os.environ.get("DIST_OUT") or tempfile.mkdtemp()
    mp.spawn(demo, args=(world_size, out), nprocs=world_size, join=True)
