"""The ways torchrun-launched (and hand-launched) programs start their process group, at 2 ranks
with torchrun's environment: env:// spelled out, a tcp:// address with explicit rank and
world_size, a shared file://, a TCPStore made by hand, the elastic queries
(is_torchelastic_launched, get_node_local_rank), the names programs import from
torch.distributed.distributed_c10d, and env:// with the environment incomplete or contradicting
the arguments."""

import os
import sys
import tempfile
from datetime import timedelta

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import GroupMember, _get_default_group, _rank_not_in_group

PORT = int(sys.argv[1])
RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
TIMEOUT = timedelta(seconds=20)


def say(label, value):
    print(f"[rank {RANK}] {label}: {value}", flush=True)


def check(label):
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    say(label, [dist.get_backend(), dist.get_rank(), dist.get_world_size(), t.item(), dist.is_initialized()])
    dist.destroy_process_group()


def attempt(label, **kwargs):
    try:
        dist.init_process_group(**kwargs)
    except Exception as err:  # noqa: BLE001 - the type and message head are what the program prints
        say(label, f"{type(err).__name__}: {str(err).splitlines()[0][:90]}")
        return
    check(label)


say("torchelastic launched", dist.is_torchelastic_launched())
try:
    _get_default_group()
except ValueError as err:
    say("default group before init", str(err))
dist.init_process_group("gloo", init_method="env://", timeout=TIMEOUT)
pg = _get_default_group()
say("default group", [pg is GroupMember.WORLD, pg.size(), pg.rank(), _rank_not_in_group(pg), _rank_not_in_group(None)])
say("node local rank", dist.get_node_local_rank())
check("env://")
attempt("tcp://", backend="gloo", init_method=f"tcp://127.0.0.1:{PORT + 2}", rank=RANK, world_size=WORLD,
        timeout=TIMEOUT)
shared = os.path.join(tempfile.gettempdir(), f"init-methods-{PORT}-{os.environ.get('DIST_LIB', 'ember')}")
attempt("file://", backend="gloo", init_method=f"file://{shared}", rank=RANK, world_size=WORLD, timeout=TIMEOUT)
store = dist.TCPStore("127.0.0.1", PORT + 3, WORLD, RANK == 0, timeout=TIMEOUT)
attempt("store", backend="gloo", store=store, rank=RANK, world_size=WORLD)
attempt("store without rank", backend="gloo", store=store)
# A fresh master port: a store re-made at once on the first init's port sometimes failed gloo's mesh
# connection under load (seen with torch's own gloo).
os.environ["MASTER_PORT"] = str(PORT + 6)
attempt("env:// with rank given", backend="gloo", rank=RANK, world_size=WORLD, timeout=TIMEOUT)
os.environ["MASTER_PORT"] = str(PORT)
attempt("tcp:// without rank", backend="gloo", init_method=f"tcp://127.0.0.1:{PORT + 4}")
saved = dict(os.environ)
for var in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
    del os.environ[var]
    attempt(f"env:// without {var}", backend="gloo", timeout=TIMEOUT)
    os.environ.update(saved)
os.environ["RANK"] = "not a number"
attempt("env:// RANK not a number", backend="gloo", timeout=TIMEOUT)
os.environ.update(saved)
os.environ["TORCHELASTIC_RUN_ID"] = "job-1"
say("torchelastic launched with a run id", dist.is_torchelastic_launched())
say("node local rank without LOCAL_RANK", dist.get_node_local_rank(fallback_rank=7) if RANK >= 0 else "-")
del os.environ["LOCAL_RANK"]
say("get_node_local_rank fallback", dist.get_node_local_rank(fallback_rank=7))
try:
    dist.get_node_local_rank()
except Exception as err:  # noqa: BLE001 - the type and message head are what the program prints
    say("get_node_local_rank no fallback", f"{type(err).__name__}: {str(err)[:60]}")

# last: PyTorch's next env:// group on MASTER_PORT would meet these subgroups' store keys
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{PORT + 5}", rank=RANK, world_size=WORLD, timeout=TIMEOUT)
groups = [dist.new_group([0]), dist.new_group([1])]  # every rank makes both, in one order
say("outside", [[_rank_not_in_group(g), g is GroupMember.NON_GROUP_MEMBER] for g in groups])
dist.destroy_process_group()
