"""More collective idioms from the distributed tutorial and forums (torchrun-style): blocking and
non-blocking point-to-point with tags, reduce_scatter of a list, all_gather of uneven sizes,
complex and half-precision all_reduce, a ring all-reduce written by hand, and the group
queries."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist


def outcome(fn):
    try:
        result = fn()
    except Exception as err:  # noqa: BLE001 - the type is what the program prints
        return type(err).__name__
    return "ok" if result is None else result


def values(t):
    return t.tolist() if not t.is_complex() else [[v.real, v.imag] for v in t.tolist()]


def ring_allreduce(send):
    """The tutorial's hand-written ring all-reduce over isend/irecv."""
    rank, size = dist.get_rank(), dist.get_world_size()
    accum = send.clone()
    send_buff = send.clone()
    recv_buff = torch.zeros_like(send)
    left, right = (rank - 1 + size) % size, (rank + 1) % size
    for i in range(size - 1):
        if i % 2 == 0:
            req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        req.wait()
    return accum


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    say = lambda label, value: print(f"[rank {rank}] {label}: {value}")  # noqa: E731

    if rank == 0:
        dist.send(torch.tensor([1.0, 2.0]), dst=1, tag=7)
        req = dist.isend(torch.arange(3), dst=1)
        req.wait()
        say("sent", "two messages")
    elif rank == 1:
        got = torch.zeros(2)
        sender = dist.recv(got, tag=7)
        say("recv", [got.tolist(), sender])
        buf = torch.zeros(3, dtype=torch.int64)
        req = dist.irecv(buf, src=0)
        req.wait()
        say("irecv", [buf.tolist(), req.is_completed()])
    dist.barrier()

    out = torch.zeros(2)
    say("reduce_scatter list", outcome(lambda: dist.reduce_scatter(out, [torch.full((2,), float(rank + i))
                                                                         for i in range(world)])))
    say("reduce_scatter out", out.tolist())
    uneven = [torch.zeros(r + 1) for r in range(world)]
    say("all_gather uneven", outcome(lambda: dist.all_gather(uneven, torch.ones(rank + 1) * rank)))
    say("all_gather uneven out", [u.tolist() for u in uneven])
    z = torch.tensor([1 + 2j, 3 - 1j]) * (rank + 1)
    dist.all_reduce(z)
    say("complex all_reduce", values(z))
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.bool):
        t = (torch.arange(4) % 2 + rank).to(dtype)
        r = outcome(lambda t=t: dist.all_reduce(t))
        say(f"all_reduce {str(dtype).split('.')[-1]}", [r, t.float().tolist()])
    for op in ("BAND", "BOR", "BXOR"):
        t = torch.tensor([6, 3], dtype=torch.int64) + rank
        say(f"all_reduce {op}", [outcome(lambda t=t, op=op: dist.all_reduce(t, op=getattr(dist.ReduceOp, op))),
                                 t.tolist()])
    say("ring allreduce", ring_allreduce(torch.tensor([float(rank + 1)] * 3)).tolist())
    say("queries", [dist.is_available(), dist.is_gloo_available(), dist.is_torchelastic_launched(),
                    dist.get_process_group_ranks(dist.group.WORLD), dist.get_global_rank(dist.group.WORLD, 0),
                    dist.get_group_rank(dist.group.WORLD, rank)])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
