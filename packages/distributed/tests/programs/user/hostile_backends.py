"""Backend names and world arguments a user gets wrong, in a world of one (env:// as torchrun
sets it, argv[1] the port): each init_process_group's exception type and message, or the
backend it picked."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch  # noqa: F401 - what the program runs on
import torch.distributed as dist

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1], RANK="0", WORLD_SIZE="1")


def attempt(label, message=True, **kwargs):
    try:
        dist.init_process_group(**kwargs)
    except Exception as err:  # noqa: BLE001 - the type and message are what the program prints
        text = str(err).splitlines()[0] if str(err) and message else ""
        print(f"{label}: {type(err).__name__}: {text}")
        return
    print(f"{label}: ok {dist.get_backend()} {dist.get_world_size()}")
    dist.destroy_process_group()


for name in ("glooo", "", "gloo:cpu", "Gloo", "GLOO", "cpu:gloo"):
    attempt(repr(name), backend=name)
attempt("no backend", backend=None)
other = f"tcp://127.0.0.1:{int(sys.argv[1]) + 1}"
attempt("world_size 0 (tcp)", message=False, backend="gloo", init_method=other, rank=0, world_size=0)
attempt("rank -1 (tcp)", backend="gloo", init_method=other, rank=-1, world_size=1)
attempt("unknown scheme", backend="gloo", init_method="foo://bar")
attempt("store and init_method", backend="gloo", init_method="env://", store=dist.HashStore(), rank=0, world_size=1)
attempt("timeout not a timedelta", backend="gloo", timeout=30)
print("initialized at the end:", dist.is_initialized())
for backend in (None, "cpu:gloo"):
    dist.init_process_group(backend)
    inherited, named = dist.new_group([0]), dist.new_group([0], backend="gloo")
    print(f"groups of {backend!r}: {dist.get_backend()} {dist.get_backend(inherited)} {dist.get_backend(named)} "
          f"{dist.group.WORLD.name()}")
    dist.destroy_process_group()
