"""FSDP1 (``FullyShardedDataParallel``) as its tutorial writes it, on the CPU with
``device_id=torch.device("cpu")`` (torchrun-style, 2 ranks): an auto_wrap_policy, a few Adam
steps, FSDP.clip_grad_norm_, no_sync accumulation, summon_full_params, the full state dict on
rank 0 (FullStateDictConfig), the sharded one, and the optimizer's state through
FSDP.optim_state_dict / optim_state_dict_to_load into a fresh model."""

import functools
import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FullStateDictConfig, ShardingStrategy, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy, size_based_auto_wrap_policy

CPU = torch.device("cpu")


def r(x):
    return round(float(x), 4)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(5, 8)
        self.blocks = nn.Sequential(Block(8), Block(8))
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        return self.out(self.blocks(torch.tanh(self.inp(x))))


def batch(rank, step):
    g = torch.Generator().manual_seed(50 * step + rank)
    return torch.randn(6, 5, generator=g), torch.randint(0, 3, (6,), generator=g)


def make(policy, **kwargs):
    torch.manual_seed(0)
    return FSDP(Net(), auto_wrap_policy=policy, device_id=CPU, **kwargs)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    def say(label, value):
        print(f"[rank {rank}] {label}: {value}")

    model = make(ModuleWrapPolicy({Block}))
    say("wrapped", sorted(n for n, m in model.named_modules() if isinstance(m, FSDP)))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for step in range(3):
        x, y = batch(rank, step)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        norm = model.clip_grad_norm_(1.0)
        opt.step()
        say(f"step {step}", [r(loss), r(norm)])

    with FSDP.summon_full_params(model):
        say("full out.weight sum", r(model.out.weight.sum()))
        say("full shapes", [tuple(p.shape) for p in model.parameters()][:3])

    cfg = FullStateDictConfig(rank0_only=True)  # offload_to_cpu on a CPU model: PyTorch frees the storage
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
        full = model.state_dict()
    say("full keys", list(full)[:4] if rank == 0 else len(full))
    if rank == 0:
        say("full sums", [r(v.sum()) for v in full.values()][:4])
    # PyTorch's pieces are ShardedTensors, ember's DTensors (docs/deviations.md): their sizes agree
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        sharded = model.state_dict()
    say("sharded keys", [list(sharded)[:3], tuple(sharded["inp.weight"].size())])
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
        osd = FSDP.optim_state_dict(model, opt)
    state = osd["state"]
    say("optim keys", sorted(state)[:3])
    say("optim exp_avg", [tuple(state["inp.weight"]["exp_avg"].shape), r(state["inp.weight"]["exp_avg"].sum())])
    say("optim param_groups", [sorted(g) for g in osd["param_groups"]][0][:4])

    fresh = make(ModuleWrapPolicy({Block}))
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=0.01)
    with FSDP.state_dict_type(fresh, StateDictType.FULL_STATE_DICT):
        fresh.load_state_dict(model.state_dict() if True else None)
        fresh_opt.load_state_dict(FSDP.optim_state_dict_to_load(fresh, fresh_opt, osd))
    x, y = batch(rank, 9)
    for m, o, name in ((model, opt, "trained"), (fresh, fresh_opt, "restored")):
        o.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        o.step()
        say(f"{name} next loss", r(loss))
    with FSDP.summon_full_params(model), FSDP.summon_full_params(fresh):
        say("restored same", [torch.allclose(a, b, atol=1e-6) for a, b in zip(model.parameters(),
                                                                               fresh.parameters())])

    # size-based policy and no_sync accumulation against one step over the whole batch
    sized = make(functools.partial(size_based_auto_wrap_policy, min_num_params=100))
    say("size wrapped", sorted(n for n, m in sized.named_modules() if isinstance(m, FSDP)))
    whole = make(None, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP)
    xs = [batch(rank, s) for s in range(2)]
    with sized.no_sync():
        nn.functional.cross_entropy(sized(xs[0][0]), xs[0][1], reduction="sum").backward()
    nn.functional.cross_entropy(sized(xs[1][0]), xs[1][1], reduction="sum").backward()
    nn.functional.cross_entropy(whole(torch.cat([xs[0][0], xs[1][0]])), torch.cat([xs[0][1], xs[1][1]]),
                                reduction="sum").backward()
    say("no_sync grad norms", [r(sized.clip_grad_norm_(1e9)), r(whole.clip_grad_norm_(1e9))])
    dist.barrier()
    dist.destroy_process_group()
    say("done", True)


if __name__ == "__main__":
    main()
