"""torchrun-style DDP (env:// from RANK/WORLD_SIZE/MASTER_*): uneven inputs under the Join
context manager, a model with a branch unused in some steps (find_unused_parameters=True),
broadcast_buffers of a BatchNorm, and DDP's errors for misuse."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        # no bias before BatchNorm: its gradient is zero, and Adam would scale the float noise
        self.stem = nn.Linear(6, 8, bias=False)
        self.bn = nn.BatchNorm1d(8)
        self.a = nn.Linear(8, 3)
        self.b = nn.Linear(8, 3)

    def forward(self, x, use_b=False):
        h = torch.relu(self.bn(self.stem(x)))
        return self.b(h) if use_b else self.a(h)


def main():
    dist.init_process_group(backend="gloo")
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world = dist.get_world_size()
    print(f"[rank {rank}] local_rank={local_rank} world={world} rank={dist.get_rank()}")
    torch.manual_seed(1)
    model = DDP(Branchy(), find_unused_parameters=True)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.manual_seed(10 + rank)
    n_batches = 3 + 2 * rank  # uneven: rank 1 has more batches
    batches = [torch.randn(4, 6) for _ in range(n_batches)]
    with Join([model]):
        for i, x in enumerate(batches):
            opt.zero_grad()
            out = model(x, use_b=(i % 2 == 1))
            loss = out.pow(2).mean()
            loss.backward()
            opt.step()
            print(f"[rank {rank}] step {i} loss {loss.item():.5f}")
    for name, p in model.module.named_parameters():
        print(f"[rank {rank}] {name} {p.sum().item():.5f}")
    print(f"[rank {rank}] running_mean {[round(v, 4) for v in model.module.bn.running_mean.tolist()]}")
    print(f"[rank {rank}] num_batches_tracked {model.module.bn.num_batches_tracked.item()}")

    # gradient accumulation (no_sync every other batch) inside Join, uneven again
    torch.manual_seed(2)
    acc_model = DDP(Branchy(), find_unused_parameters=True)
    acc_opt = torch.optim.SGD(acc_model.parameters(), lr=0.1)
    torch.manual_seed(20 + rank)
    with Join([acc_model]):
        for i in range(4 + 3 * rank):
            x = torch.randn(4, 6)
            if i % 2 == 0:
                with acc_model.no_sync():
                    acc_model(x, use_b=i % 4 == 0).sum().backward()
            else:
                acc_model(x, use_b=i % 3 == 0).sum().backward()
                acc_opt.step()
                acc_opt.zero_grad()
    print(f"[rank {rank}] accumulated {[round(p.sum().item(), 4) for p in acc_model.parameters()]}")
    print(f"[rank {rank}] accumulated bn {[round(v, 4) for v in acc_model.module.bn.running_var.tolist()]}")

    # find_unused_parameters=False and a parameter that got no gradient: the next forward raises
    torch.manual_seed(1)
    strict = DDP(Branchy())
    strict(torch.randn(4, 6), use_b=True).sum().backward()
    try:
        strict(torch.randn(4, 6))
        print(f"[rank {rank}] second forward ok")
    except RuntimeError as err:
        first = str(err).split("\n")[0]
        print(f"[rank {rank}] RuntimeError: {first[:60]}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
