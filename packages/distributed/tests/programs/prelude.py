"""Shared start of every test program: pick the library, join the group, write results."""

import faulthandler
import json
import os
from datetime import timedelta

if "DIST_STACKS_AFTER" in os.environ:  # the harness's limit is near: show where this rank is
    faulthandler.dump_traceback_later(float(os.environ["DIST_STACKS_AFTER"]), exit=False)

if os.environ.get("DIST_LIB", "ember") == "torch":
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp  # noqa: F401 - programs import it from here
else:
    import ember as torch
    import ember.distributed as dist
    import ember.multiprocessing as mp  # noqa: F401

LIB = os.environ.get("DIST_LIB", "ember")


def init(timeout_s: float = 60.0, **kwargs):
    """init_process_group the way the harness set the process up (env://, tcp://, file://)."""
    init_method = os.environ.get("DIST_INIT")
    if init_method is not None:
        kwargs.setdefault("rank", int(os.environ["RANK"]))
        kwargs.setdefault("world_size", int(os.environ["WORLD_SIZE"]))
    dist.init_process_group("gloo", init_method=init_method, timeout=timedelta(seconds=timeout_s), **kwargs)
    return dist.get_rank(), dist.get_world_size()


def encode(value):
    """JSON-able form of tensors and nested results (dtype kept as text)."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.is_complex():
            return {"dtype": str(t.dtype).split(".")[-1], "real": t.real.tolist(), "imag": t.imag.tolist()}
        if t.dtype in (torch.bfloat16, torch.float16):
            return {"dtype": str(t.dtype).split(".")[-1], "value": t.float().tolist()}
        return {"dtype": str(t.dtype).split(".")[-1], "value": t.tolist()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def error_of(fn):
    """Runs ``fn``; the exception's type name, or "ok"."""
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the type is what the test compares
        return type(err).__name__
    return "ok"


def write(rank: int, results) -> None:
    path = os.path.join(os.environ["DIST_OUT"], f"rank{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(encode(results), f)
    os.replace(path + ".tmp", path)
