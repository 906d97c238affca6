"""Calls before init_process_group and bad init arguments, in one process: each call's exception
type and message (ember's against PyTorch's)."""

import os
import tempfile
import warnings

from prelude import dist, torch, write

warnings.simplefilter("ignore")
for var in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
    os.environ.pop(var, None)
R = {}


def outcome(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - what the test compares
        return [type(err).__name__, str(err).split("\n")[0]]
    return "ok"


x = torch.ones(2)
R["all_reduce"] = outcome(lambda: dist.all_reduce(x))
R["barrier"] = outcome(lambda: dist.barrier())
R["get_rank"] = outcome(lambda: dist.get_rank())
R["new_group"] = outcome(lambda: dist.new_group([0]))
R["send"] = outcome(lambda: dist.send(x, 1))
R["all_gather_object"] = outcome(lambda: dist.all_gather_object([None], 1))
R["destroy"] = outcome(lambda: dist.destroy_process_group())
R["is_initialized"] = dist.is_initialized()
R["node_local_rank"] = outcome(lambda: dist.get_node_local_rank())
R["node_local_rank_fallback"] = dist.get_node_local_rank(fallback_rank=3)
R["backend_any_name"] = str(dist.Backend("Foo"))
R["init_unknown_backend"] = outcome(
    lambda: dist.init_process_group("foo", init_method="tcp://127.0.0.1:1", rank=0, world_size=1))
R["init_bad_scheme"] = outcome(
    lambda: dist.init_process_group("gloo", init_method="bogus://x", rank=0, world_size=1))
R["init_env_missing"] = outcome(lambda: dist.init_process_group("gloo"))
R["tcp_no_rank"] = outcome(lambda: dist.init_process_group("gloo", init_method="tcp://127.0.0.1:1", world_size=1))
R["tcp_no_size"] = outcome(lambda: dist.init_process_group("gloo", init_method="tcp://127.0.0.1:1", rank=0))
R["tcp_no_port"] = outcome(
    lambda: dist.init_process_group("gloo", init_method="tcp://127.0.0.1", rank=0, world_size=1))
path = os.path.join(tempfile.mkdtemp(), "rendezvous")
R["file_no_rank"] = outcome(lambda: dist.init_process_group("gloo", init_method=f"file://{path}", world_size=1))
R["file_no_size"] = outcome(lambda: dist.init_process_group("gloo", init_method=f"file://{path}", rank=0))
R["file_no_path"] = outcome(lambda: dist.init_process_group("gloo", init_method="file://", rank=0, world_size=1))
R["still_uninitialized"] = dist.is_initialized()
R["backend_available"] = [dist.is_backend_available(b) for b in ("gloo", "GLOO", "foo")]
counts = [dist.get_pg_count()]
port = __import__("socket").socket()
port.bind(("127.0.0.1", 0))
free = port.getsockname()[1]
port.close()
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free}", rank=0, world_size=1)
counts.append(dist.get_pg_count())
dist.new_group([0])
dist.new_subgroups(group_size=1)
counts.append(dist.get_pg_count())
dist.destroy_process_group()
counts.append(dist.get_pg_count())
# PyTorch counts its failed init attempts above too: compare what the groups added, and the reset
R["pg_count"] = [counts[2] - counts[1], counts[3]]
write(0, R)
