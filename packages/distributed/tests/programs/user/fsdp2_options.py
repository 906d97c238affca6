"""fully_shard's options as training scripts set them (torchrun-style, 2 ranks): reshard_after_forward
True/False per layer, a MixedPrecisionPolicy with output_dtype and cast_forward_inputs,
shard_placement_fn sharding on dim 1, explicit unshard()/reshard(), forward
and backward prefetch lists, and each loop checked against a plain model on one rank."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard


def r(x):
    return round(float(x), 4)


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))


def batch(step):
    g = torch.Generator().manual_seed(30 + step)  # the same data on every rank
    return torch.randn(4, 6, generator=g), torch.randn(4, 2, generator=g)


def train(model, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        x, y = batch(step)
        opt.zero_grad()
        out = model(x)
        loss = nn.functional.mse_loss(out.float(), y)
        loss.backward()
        opt.step()
        losses.append(r(loss))
    return losses, out


def full_sums(model):
    return [r(p.full_tensor().sum() if isinstance(p, DTensor) else p.sum()) for p in model.parameters()]


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    def say(label, value):
        print(f"[rank {rank}] {label}: {value}")

    plain = net()
    plain_losses, _ = train(plain)
    say("plain", [plain_losses, full_sums(plain)])

    for label, kwargs in (("reshard False", {"reshard_after_forward": False}),
                          ("shard dim 1", {"shard_placement_fn": lambda p: Shard(1) if p.ndim == 2 else Shard(0)})):
        model = net()
        for i in (0, 2, 4):
            fully_shard(model[i], **kwargs)
        fully_shard(model, **kwargs)
        losses, _ = train(model)
        say(label, [losses, full_sums(model)])
        say(f"{label} placements", [str(p.placements[0]) for p in model.parameters()][:2])
        say(f"{label} local shapes", [tuple(p.to_local().shape) for p in model.parameters()][:2])

    model = net()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32,
                                  output_dtype=torch.float32, cast_forward_inputs=True)
    for i in (0, 2, 4):
        fully_shard(model[i], mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    losses, out = train(model)
    say("bf16 params, fp32 output", [str(out.dtype).split(".")[-1], len(losses), all(abs(a - b) < 0.05 for a, b in
                                                                       zip(losses, plain_losses))])
    say("bf16 master weights", [str(p.dtype).split(".")[-1] for p in model.parameters()][:2])

    model = net()
    layers = [model[0], model[2], model[4]]
    for layer in layers:
        fully_shard(layer)
    fully_shard(model)
    layers[0].set_modules_to_forward_prefetch([layers[1]])
    layers[2].set_modules_to_backward_prefetch([layers[1]])
    losses, _ = train(model)
    say("prefetch lists", [losses, full_sums(model)])
    model.unshard()
    say("after unshard() params", type(model[0].weight).__name__)
    model.reshard()
    say("after reshard() params", [type(model[0].weight).__name__, tuple(model[0].weight.to_local().shape)])
    say("is FSDPModule", [isinstance(model, FSDPModule), isinstance(model[1], FSDPModule)])
    x, _ = batch(0)
    with torch.no_grad():
        say("eval equals plain", torch.allclose(model(x), plain(x), atol=1e-5))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
