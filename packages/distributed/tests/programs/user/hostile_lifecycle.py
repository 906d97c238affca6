"""Misuse of the process group's life cycle and of collectives' arguments at 2 ranks
(torchrun-style): each call's exception type and first line, or "ok", printed per rank. Every
bad call here fails on each rank before any communication, so the ranks stay in step."""

import os
import sys
from datetime import timedelta

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist


def outcome(fn):
    try:
        result = fn()
    except Exception as err:  # noqa: BLE001 - the type is what the program prints
        return f"{type(err).__name__}"
    return "ok" if result is None else repr(result)


def message(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the message is what the program prints
        return str(err).split("\n")[0]
    return "ok"


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])

    def say(label, value):
        print(f"[rank {rank}] {label}: {value}")

    say("before init get_rank", outcome(lambda: dist.get_rank()))
    say("before init get_world_size", outcome(lambda: dist.get_world_size()))
    say("before init barrier", outcome(lambda: dist.barrier()))
    say("init", outcome(lambda: dist.init_process_group("gloo", timeout=timedelta(seconds=20))))
    say("init twice", outcome(lambda: dist.init_process_group("gloo")))
    say("backend", dist.get_backend())

    t = torch.ones(3)
    say("new_group out of range", outcome(lambda: dist.new_group([0, world])))
    say("new_group duplicate", outcome(lambda: dist.new_group([0, 0])))
    say("not a tensor", outcome(lambda: dist.all_reduce([1.0, 2.0])))
    say("int AVG", outcome(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int64), op=dist.ReduceOp.AVG)))
    say("bool SUM", outcome(lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool))))
    say("broadcast bad src", outcome(lambda: dist.broadcast(t, src=world + 1)))
    say("all_gather short list", outcome(lambda: dist.all_gather([torch.zeros(3)], t)))
    say("all_gather wrong dtype", outcome(lambda: dist.all_gather([torch.zeros(3, dtype=torch.int32)] * world, t)))
    say("all_gather_into_tensor wrong size", outcome(lambda: dist.all_gather_into_tensor(torch.zeros(5), t)))
    say("all_to_all_single bad size", outcome(lambda: dist.all_to_all_single(torch.zeros(3), torch.ones(4))))
    say("recv from self", outcome(lambda: dist.recv(torch.zeros(1), src=rank)))
    say("send to self message", message(lambda: dist.send(torch.zeros(1), dst=rank)))
    grad_leaf = torch.ones(2, requires_grad=True)
    say("requires_grad leaf", outcome(lambda: dist.all_reduce(grad_leaf)))
    say("after leaf", grad_leaf.tolist())
    say("is_initialized", dist.is_initialized())
    dist.barrier()
    say("destroy", outcome(lambda: dist.destroy_process_group()))
    say("is_initialized after", dist.is_initialized())
    say("after destroy all_reduce", outcome(lambda: dist.all_reduce(t)))
    say("after destroy get_rank", outcome(lambda: dist.get_rank()))
    say("destroy twice", outcome(lambda: dist.destroy_process_group()))
    say("re-init", outcome(lambda: dist.init_process_group("gloo")))
    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    say("re-init all_reduce", x.tolist())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
