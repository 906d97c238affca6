"""The DDP tutorial as readers write it: mp.spawn, DistributedSampler with set_epoch, gradient
accumulation under no_sync, a checkpoint saved on rank 0, a barrier and a load with map_location.
argv: the port. Each rank prints "[rank r] ..." lines."""

import os
import sys
import tempfile

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def log(text):
    sys.stdout.write(text + "\n")  # one write per line: the ranks share the spawning process's stdout
    sys.stdout.flush()


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = sys.argv[1]
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 16)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(16, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def demo(rank, world_size, ckpt_dir):
    setup(rank, world_size)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(37, 10), torch.randn(37, 5))
    model = ToyModel()
    ddp_model = DDP(model)
    log(f"[rank {rank}] is_initialized={dist.is_initialized()} backend={dist.get_backend()} "
          f"world={dist.get_world_size()} default_pg_size={dist.group.WORLD.size()}")
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=7)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    log(f"[rank {rank}] sampler len={len(sampler)} loader len={len(loader)} total={sampler.total_size}")
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.MSELoss()
    accum = 2
    for epoch in range(2):
        sampler.set_epoch(epoch)
        log(f"[rank {rank}] epoch {epoch} indices {list(sampler)}")
        for step, (x, y) in enumerate(loader):
            last = (step + 1) % accum == 0 or step + 1 == len(loader)
            if not last:
                with ddp_model.no_sync():
                    loss = loss_fn(ddp_model(x), y) / accum
                    loss.backward()
            else:
                loss = loss_fn(ddp_model(x), y) / accum
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            log(f"[rank {rank}] epoch {epoch} step {step} loss {loss.item():.5f}")
    path = os.path.join(ckpt_dir, "model.checkpoint")
    if rank == 0:
        torch.save({"model": ddp_model.state_dict(), "optim": optimizer.state_dict(), "epoch": 2}, path)
    dist.barrier()
    ckpt = torch.load(path, map_location={"cuda:0": "cpu"}, weights_only=True)
    fresh = DDP(ToyModel())
    fresh.load_state_dict(ckpt["model"])
    opt2 = optim.SGD(fresh.parameters(), lr=0.05, momentum=0.9)
    opt2.load_state_dict(ckpt["optim"])
    log(f"[rank {rank}] ckpt keys {sorted(ckpt['model'])} epoch {ckpt['epoch']}")
    same = all(torch.equal(a, b) for a, b in zip(fresh.parameters(), ddp_model.parameters()))
    log(f"[rank {rank}] loaded equal {same}")
    x = torch.ones(3, 10) * (rank + 1)
    out = fresh(x)
    out.sum().backward()
    opt2.step()
    w = fresh.module.net1.weight
    log(f"[rank {rank}] after resume w-sum {w.sum().item():.5f} grad-norm {w.grad.norm().item():.5f}")
    # BatchNorm buffers under no_sync accumulation: DDP broadcasts rank 0's buffers before a
    # forward only when the previous forward synced
    torch.manual_seed(3)
    bn_model = DDP(nn.Sequential(nn.Linear(10, 4), nn.BatchNorm1d(4)))
    torch.manual_seed(30 + rank)
    for step in range(4):
        x = torch.randn(6, 10) + rank
        if step % 2 == 0:
            with bn_model.no_sync():
                bn_model(x).sum().backward()
        else:
            bn_model(x).sum().backward()
        stats = bn_model.module[1].running_mean
        log(f"[rank {rank}] bn step {step} running_mean {[round(v, 4) for v in stats.tolist()]}")
    with torch.no_grad():
        bn_model(torch.randn(2, 10))
    bn_model(torch.randn(6, 10)).sum().backward()
    log(f"[rank {rank}] bn after a no_grad forward {[round(v, 4) for v in bn_model.module[1].running_var.tolist()]}")
    dist.barrier()
    if rank == 0:
        os.remove(path)
    dist.destroy_process_group()
    log(f"[rank {rank}] done initialized={dist.is_initialized()}")


if __name__ == "__main__":
    world_size = 2
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(demo, args=(world_size, d), nprocs=world_size, join=True)
    print("all done")
