"""DDP's constructor options as real training scripts set them (torchrun-style, 2 ranks):
static_graph, gradient_as_bucket_view, a small bucket_cap_mb, find_unused_parameters with a
branch skipped on one step, a model with tied (shared) weights, no_sync accumulation checked
against one synced step, and DDP's errors when a parameter goes unused without
find_unused_parameters."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def r(t):
    return [round(v, 5) for v in t.detach().reshape(-1).tolist()[:6]]


class Tied(nn.Module):
    """A language-model head tied to its embedding."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.mid = nn.Linear(4, 4)
        self.head = nn.Linear(4, 7, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        return self.head(torch.tanh(self.mid(self.emb(idx))))


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)
        self.out = nn.Linear(3, 1)

    def forward(self, x, use_b=True):
        h = self.a(x)
        if use_b:
            h = h + self.b(x)
        return self.out(torch.relu(h))


def train(rank, label, model, steps, make_batch, **fwd):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step in range(steps):
        x, y = make_batch(step)
        opt.zero_grad()
        kwargs = {k: v(step) for k, v in fwd.items()}
        loss = nn.functional.mse_loss(model(x, **kwargs), y)
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 5))
    print(f"[rank {rank}] {label} losses {losses}")


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    def batch(step):
        g = torch.Generator().manual_seed(100 * step + rank)
        return torch.randn(4, 3, generator=g), torch.randn(4, 1, generator=g)

    for kwargs in ({"static_graph": True}, {"gradient_as_bucket_view": True}, {"bucket_cap_mb": 0.0001},
                   {"gradient_as_bucket_view": True, "static_graph": True}, {"broadcast_buffers": False}):
        torch.manual_seed(0)
        model = DDP(Branchy(), **kwargs)
        train(rank, f"{sorted(kwargs)}", model, 3, batch)
        print(f"[rank {rank}] {sorted(kwargs)} weight {r(model.module.out.weight)}")
        grad = model.module.a.weight.grad
        print(f"[rank {rank}] {sorted(kwargs)} grad {r(grad)} contiguous {grad.is_contiguous()}")

    # find_unused_parameters: b is skipped on odd steps on every rank
    torch.manual_seed(0)
    model = DDP(Branchy(), find_unused_parameters=True)
    train(rank, "find_unused", model, 4, batch, use_b=lambda s: s % 2 == 0)
    print(f"[rank {rank}] find_unused b {r(model.module.b.weight)} grad None {model.module.b.weight.grad is None}")
    # static_graph with a branch that is never used
    torch.manual_seed(0)
    model = DDP(Branchy(), static_graph=True)
    train(rank, "static unused", model, 3, batch, use_b=lambda s: False)
    print(f"[rank {rank}] static unused b grad {model.module.b.weight.grad}")

    # tied weights: one parameter, gradients from both uses, all-reduced once
    torch.manual_seed(1)
    tied = DDP(Tied())
    opt = torch.optim.Adam(tied.parameters(), lr=0.01)
    print(f"[rank {rank}] tied parameters {len(list(tied.parameters()))}")
    for step in range(3):
        g = torch.Generator().manual_seed(7 * step + rank)
        idx = torch.randint(0, 7, (5,), generator=g)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(tied(idx), idx)
        loss.backward()
        opt.step()
        print(f"[rank {rank}] tied step {step} loss {round(loss.item(), 5)} emb {r(tied.module.emb.weight)}")
    print(f"[rank {rank}] tied still tied {tied.module.head.weight is tied.module.emb.weight}")

    # no_sync accumulation equals one synced step over the same data
    torch.manual_seed(2)
    acc = DDP(nn.Linear(3, 2))
    torch.manual_seed(2)
    one = DDP(nn.Linear(3, 2))
    xs = [batch(s) for s in range(3)]
    for i, (x, y) in enumerate(xs):
        if i < 2:
            with acc.no_sync():
                nn.functional.mse_loss(acc(x), y[:, :1].expand(4, 2)).backward()
        else:
            nn.functional.mse_loss(acc(x), y[:, :1].expand(4, 2)).backward()
    print(f"[rank {rank}] accumulated grad {r(acc.module.weight.grad)}")
    xall = torch.cat([x for x, _ in xs])
    yall = torch.cat([y[:, :1].expand(4, 2) for _, y in xs])
    (nn.functional.mse_loss(one(xall), yall, reduction="sum") / 8).backward()
    print(f"[rank {rank}] one-step grad {r(one.module.weight.grad)}")

    # a parameter unused without find_unused_parameters: the next forward raises
    torch.manual_seed(0)
    strict = DDP(Branchy())
    x, y = batch(0)
    nn.functional.mse_loss(strict(x, use_b=False), y).backward()
    try:
        strict(x)
        print(f"[rank {rank}] unused second forward ok")
    except RuntimeError as err:
        print(f"[rank {rank}] unused second forward {type(err).__name__}: {str(err).splitlines()[0][:60]}")
    dist.barrier()
    dist.destroy_process_group()
    print(f"[rank {rank}] done")


if __name__ == "__main__":
    main()
