"""async_save: the call returns once the state is staged; changing the parameters right after
must not reach the checkpoint; the future resolves when the checkpoint is complete and loadable
(into an FSDP2 model of the same shape), the same as on PyTorch's DCP."""

import os
import tempfile

from prelude import LIB, init, torch, write

if LIB == "torch":
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard
else:
    import ember.distributed.checkpoint as dcp
    from ember.distributed.fsdp import fully_shard

nn = torch.nn
rank, world = init()
where = os.environ.get("DCP_DIR") or tempfile.mkdtemp()


def make():
    torch.manual_seed(0)
    return fully_shard(nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 3)))


model = make()
saved = {k: v.full_tensor().clone() for k, v in model.state_dict().items()}
future = dcp.async_save(model.state_dict(), checkpoint_id=where)
with torch.no_grad():
    for p in model.parameters():
        p.to_local().add_(100.0)  # after staging: must not change what is written
result = future.result()
R = {"future_done": future.done(), "metadata": type(result).__name__ in ("Metadata",)}
fresh = make()
with torch.no_grad():
    for p in fresh.parameters():
        p.to_local().zero_()
state = fresh.state_dict()
dcp.load(state, checkpoint_id=where)
R["loaded_equals_staged"] = all(bool(torch.equal(v.full_tensor(), saved[k])) for k, v in fresh.state_dict().items())
# get_state_dict of a DDP-wrapped model names parameters without DDP's ``module.``; they load
# into the wrapped model again (set_state_dict) and into the bare one
if LIB == "torch":
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.nn.parallel import DistributedDataParallel as DDP
else:
    from ember.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from ember.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
ddp = DDP(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)))
adam = torch.optim.Adam(ddp.parameters(), lr=0.1)
ddp(torch.ones(4, 2)).sum().backward()
adam.step()
msd, osd = get_state_dict(ddp, adam)
R["ddp_keys"] = [sorted(msd), sorted(osd["state"]), osd["param_groups"][0]["params"]]
torch.manual_seed(1)
ddp2 = DDP(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)))
adam2 = torch.optim.Adam(ddp2.parameters(), lr=0.1)
set_state_dict(ddp2, adam2, model_state_dict=msd, optim_state_dict=osd)
R["ddp_roundtrip"] = all(bool(torch.equal(a, b)) for a, b in zip(ddp.parameters(), ddp2.parameters())) and bool(
    torch.equal(adam2.state_dict()["state"][0]["exp_avg"], adam.state_dict()["state"][0]["exp_avg"]))
# the DCP recipe: a Stateful application state (get_state_dict/set_state_dict inside), a module
# given straight as a value, and a plain value beside them
if LIB == "torch":
    from torch.distributed.checkpoint.stateful import Stateful
else:
    from ember.distributed.checkpoint.stateful import Stateful


class AppState(Stateful):
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self):
        msd, osd = get_state_dict(self.model, self.optimizer)
        return {"model": msd, "optim": osd}

    def load_state_dict(self, state_dict):
        set_state_dict(self.model, self.optimizer, model_state_dict=state_dict["model"],
                       optim_state_dict=state_dict["optim"])


app_dir = where + "-app"
dcp.save({"app": AppState(ddp, adam), "step": 7, "bare": fresh}, checkpoint_id=app_dir)
torch.manual_seed(1)
ddp3 = DDP(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)))
adam3 = torch.optim.Adam(ddp3.parameters())
bare = make()
loaded = {"app": AppState(ddp3, adam3), "step": 0, "bare": bare}
dcp.load(loaded, checkpoint_id=app_dir)
R["stateful"] = [isinstance(ddp, Stateful), isinstance(adam, Stateful), isinstance(3, Stateful), loaded["step"],
                 all(bool(torch.equal(a, b)) for a, b in zip(ddp.parameters(), ddp3.parameters())),
                 bool(torch.equal(adam3.state_dict()["state"][0]["exp_avg"], adam.state_dict()["state"][0]["exp_avg"])),
                 all(bool(torch.equal(a.full_tensor(), b.full_tensor())) for a, b in zip(fresh.parameters(),
                                                                                        bare.parameters()))]
R["files"] = sorted(f for f in os.listdir(where) if not f.startswith(".") or f == ".metadata") if LIB == "ember" else []
write(rank, R)
