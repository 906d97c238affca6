"""FSDP2 the way pytorch/examples' distributed/FSDP2 example runs it: the model built on the meta
device, ``fully_shard`` per block and at the root, ``to_empty``, a checkpoint loaded as
``distribute_tensor`` pieces with ``load_state_dict(assign=True)``, training with explicit
``unshard()`` before each forward and ``clip_grad_norm_``, then whole state dicts through
``get_*_state_dict(full_state_dict, cpu_offload)`` (rank 0 only) loaded back into a fresh model with
``set_*_state_dict(broadcast_from_rank0)`` (the other ranks pass ``{}``)."""

import numpy as np
from prelude import LIB, init, torch, write

if LIB == "torch":
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
        set_model_state_dict,
        set_optimizer_state_dict,
    )
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor
else:
    from ember.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
        set_model_state_dict,
        set_optimizer_state_dict,
    )
    from ember.distributed.fsdp import fully_shard
    from ember.distributed.tensor import DTensor, Shard, distribute_tensor

nn = torch.nn
rank, world = init()
R = {}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(6)
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.norm(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.layers = nn.ModuleList([Block() for _ in range(3)])
        self.out = nn.Linear(6, 4, bias=False)

    def forward(self, tokens):
        h = self.emb(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)


def build():
    with torch.device("meta"):
        model = Net()
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    for i, layer in enumerate(model.layers):
        if i + 1 < len(model.layers):
            layer.set_modules_to_forward_prefetch([model.layers[i + 1]])
        if i > 0:
            layer.set_modules_to_backward_prefetch([model.layers[i - 1]])
    model.to_empty(device="cpu")
    return model


model = build()
weight = model.layers[0].fc.weight
R["after_to_empty"] = [type(weight).__name__, weight.is_meta, weight.to_local().device.type,
                       [tuple(p.placements) == (Shard(0),) for p in model.parameters()].count(False)]
rs = np.random.RandomState(0)
full = {k: torch.tensor((rs.randn(*v.shape) * 0.3).astype("float32")) for k, v in model.state_dict().items()}
sharded = {}
for name, mine in model.state_dict().items():
    sharded[name] = nn.Parameter(distribute_tensor(full[name], mine.device_mesh, mine.placements))
model.load_state_dict(sharded, strict=False, assign=True)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
data = np.random.RandomState(10 + rank)
losses = []
for step in range(3):
    model.unshard()
    if step == 0:
        R["unsharded"] = [type(model.out.weight).__name__, model.out.weight.is_leaf, list(model.out.weight.shape)]
    loss = model(torch.tensor(data.randint(0, 10, (2, 5)))).square().mean()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
    opt.zero_grad()
    losses.append([loss.item(), norm.full_tensor().item()])
R["losses"] = losses
R["after_training"] = sorted({(type(p).__name__, p.is_leaf) for p in model.parameters()})
full_opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
msd = get_model_state_dict(model, options=full_opts)
osd = get_optimizer_state_dict(model, opt, options=full_opts)
R["full_state"] = [sorted(msd), {k: v.sum().item() for k, v in msd.items()},
                   {k: v["exp_avg"].sum().item() for k, v in osd["state"].items()} if osd else osd]

fresh = build()
set_model_state_dict(fresh, msd, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
opt2 = torch.optim.Adam(fresh.parameters(), lr=1e-2)
set_optimizer_state_dict(fresh, opt2, osd, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
R["resumed_state"] = sorted({(type(t).__name__, tuple(t.shape) == tuple(p.shape)) for p in fresh.parameters()
                             for t in opt2.state[p].values() if t.dim() > 0})
loss = fresh(torch.tensor(data.randint(0, 10, (2, 5)))).square().mean()
loss.backward()
opt2.step()
R["resumed"] = [loss.item(), sum(p.full_tensor().sum().item() for p in fresh.parameters())]
R["dtensor_params"] = all(isinstance(p, DTensor) for p in fresh.parameters())
write(rank, R)
