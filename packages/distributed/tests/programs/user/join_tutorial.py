"""The "Distributed Training with Uneven Inputs Using the Join Context Manager" tutorial
(mp.spawn, 2 ranks; argv[1] the port): DDP with ZeroRedundancyOptimizer under one Join, and
the tutorial's own Joinable, a Counter with its JoinHook and sync_max_count."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.join import Join, Joinable, JoinHook
from torch.distributed.optim import ZeroRedundancyOptimizer as ZeRO
from torch.nn.parallel import DistributedDataParallel as DDP

BACKEND = "gloo"
WORLD_SIZE = 2
NUM_INPUTS = 5


def log(text):
    sys.stdout.write(text + "\n")  # one write per line: the ranks share the spawning process's stdout
    sys.stdout.flush()


class CounterJoinHook(JoinHook):
    def __init__(self, counter, sync_max_count):
        self.counter = counter
        self.sync_max_count = sync_max_count

    def main_hook(self):
        t = torch.zeros(1, device=self.counter.device)
        dist.all_reduce(t)

    def post_hook(self, is_last_joiner: bool):
        if not self.sync_max_count:
            return
        rank = dist.get_rank(self.counter.process_group)
        common_rank = self.counter.find_common_rank(rank, is_last_joiner)
        if rank == common_rank:
            self.counter.max_count = self.counter.count.detach().clone()
        dist.broadcast(self.counter.max_count, src=common_rank)


class Counter(Joinable):
    def __init__(self, device, process_group):
        super().__init__()
        self.device = device
        self.process_group = process_group
        self.count = torch.tensor([0], device=device).float()
        self.max_count = torch.tensor([0], device=device).float()

    def __call__(self):
        Join.notify_join_context(self)
        t = torch.ones(1, device=self.device).float()
        dist.all_reduce(t)
        self.count += t

    def join_hook(self, **kwargs) -> JoinHook:
        sync_max_count = kwargs["sync_max_count"] if "sync_max_count" in kwargs else False
        return CounterJoinHook(self, sync_max_count)

    @property
    def join_device(self) -> torch.device:
        return self.device

    @property
    def join_process_group(self):
        return self.process_group

    def find_common_rank(self, rank, to_consider):
        common_rank = torch.tensor([rank if to_consider else -1], device=self.device)
        dist.all_reduce(common_rank, op=dist.ReduceOp.MAX, group=self.process_group)
        common_rank = common_rank.item()
        return common_rank


def worker(rank):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = sys.argv[1]
    dist.init_process_group(BACKEND, rank=rank, world_size=WORLD_SIZE)

    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(1, 1))
    optim = ZeRO(model.parameters(), torch.optim.Adam, lr=0.01)
    # Rank 1 gets one more input than rank 0
    inputs = [torch.tensor([1.0 + i]) for i in range(NUM_INPUTS + rank)]
    num_inputs = 0
    with Join([model, optim]):
        for input in inputs:
            num_inputs += 1
            loss = model(input).sum()
            loss.backward()
            optim.step()
    log(f"[rank {rank}] has exhausted all {num_inputs} of its inputs! weight "
        f"{model.module.weight.item():.5f} bias {model.module.bias.item():.5f}")

    counter = Counter(torch.device("cpu"), dist.group.WORLD)
    with Join([counter], sync_max_count=True):
        for _ in range(NUM_INPUTS + 2 * rank):
            counter()
    log(f"[rank {rank}] {int(counter.count.item())} inputs processed before rank {rank} ran out, "
        f"{int(counter.max_count.item())} inputs processed across all ranks")
    try:
        with Join([counter], throw_on_early_termination=True):
            for _ in range(NUM_INPUTS + rank):
                counter()
        log(f"[rank {rank}] no early termination")
    except RuntimeError as err:
        log(f"[rank {rank}] early termination: RuntimeError {str(err).split('.')[0]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, nprocs=WORLD_SIZE, join=True)
