"""FSDP1 (``FullyShardedDataParallel``) training scripts the way PyTorch programs write them:
auto-wrap policies, sharding strategies, AdamW/SGD over ``model.parameters()``, full state dicts
(rank 0 only, offloaded) saved and loaded into a fresh wrapped model, ``clip_grad_norm_``,
``no_sync`` gradient accumulation, ``summon_full_params`` with writeback, bf16 mixed precision and
the errors of bad arguments. Weights are set deterministically (not from the RNG) so both
libraries start from the same model."""

import functools

from prelude import LIB, error_of, init, torch, write

if LIB == "torch":
    from torch.distributed.fsdp import (
        CPUOffload,
        FullStateDictConfig,
        MixedPrecision,
        ShardingStrategy,
        StateDictType,
    )
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import (
        ModuleWrapPolicy,
        size_based_auto_wrap_policy,
        transformer_auto_wrap_policy,
    )
else:
    from ember.distributed.fsdp import (
        CPUOffload,
        FullStateDictConfig,
        MixedPrecision,
        ShardingStrategy,
        StateDictType,
    )
    from ember.distributed.fsdp import FullyShardedDataParallel as FSDP
    from ember.distributed.fsdp.wrap import (
        ModuleWrapPolicy,
        size_based_auto_wrap_policy,
        transformer_auto_wrap_policy,
    )

nn = torch.nn
rank, world = init()
CPU = torch.device("cpu")  # PyTorch's FSDP1 runs on the CPU only when told so
R = {}


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return x + torch.relu(self.norm(self.fc(x)))


class Net(nn.Module):
    def __init__(self, d=6, depth=3):
        super().__init__()
        self.inp = nn.Linear(5, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(depth)])
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def make():
    m = Net()
    with torch.no_grad():
        for i, (_, p) in enumerate(m.named_parameters()):
            n = p.numel()
            p.copy_((torch.sin(torch.arange(n, dtype=torch.float32) * 0.7 + i) * 0.4).reshape(p.shape))
    return m


X = torch.cos(torch.arange(8 * 5, dtype=torch.float32) * 0.3).reshape(8, 5)
Y = torch.sin(torch.arange(8 * 3, dtype=torch.float32) * 0.5).reshape(8, 3)
per = 8 // world
Xl, Yl = X[rank * per:(rank + 1) * per], Y[rank * per:(rank + 1) * per]


def train(model, opt, steps=3, clip=None):
    losses, norms = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(Xl), Yl)
        loss.backward()
        if clip is not None:
            norms.append(float(model.clip_grad_norm_(clip)))
        opt.step()
        losses.append(loss.item())
    return losses, norms


def full_sd(model, rank0_only=True):
    # PyTorch 2.13's FSDP1 crashes (SIGSEGV) with offload_to_cpu=True when its device is the CPU
    cfg = FullStateDictConfig(offload_to_cpu=LIB != "torch", rank0_only=rank0_only)
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
        sd = model.state_dict()
    return {k: v.tolist() for k, v in sd.items()}


# (1) FULL_SHARD, transformer auto-wrap, AdamW; full state dict saved and loaded.
policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
model = FSDP(make(), device_id=CPU, auto_wrap_policy=policy, sharding_strategy=ShardingStrategy.FULL_SHARD,
             use_orig_params=True)
R["wrapped"] = [type(m).__name__ for m in model.modules() if isinstance(m, FSDP)]
R["n_fsdp"] = len(FSDP.fsdp_modules(model))
opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
R["full_losses"], _ = train(model, opt)
sd = full_sd(model)
R["full_sd"] = sd
everyone = full_sd(model, rank0_only=False)
R["sd_keys"] = list(everyone.keys())
fresh = FSDP(Net(), device_id=CPU, auto_wrap_policy=policy)
with FSDP.state_dict_type(fresh, StateDictType.FULL_STATE_DICT):
    fresh.load_state_dict({k: torch.tensor(v) for k, v in everyone.items()})
with torch.no_grad():
    R["loaded_out"] = [fresh(Xl).tolist(), model(Xl).tolist()]
R["default_sd_keys"] = list(model.state_dict().keys())

# (1b) size-based and class-based policies, plain (flat-parameter) mode, SGD.
size_policy = functools.partial(size_based_auto_wrap_policy, min_num_params=40)
m2 = FSDP(make(), device_id=CPU, auto_wrap_policy=size_policy)
R["size_n_fsdp"] = len(FSDP.fsdp_modules(m2))
R["size_losses"], _ = train(m2, torch.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9))
R["size_sd"] = full_sd(m2)
m3 = FSDP(make(), device_id=CPU, auto_wrap_policy=ModuleWrapPolicy({Block, nn.Linear}),
          cpu_offload=CPUOffload(offload_params=False))
R["class_n_fsdp"] = len(FSDP.fsdp_modules(m3))
R["class_losses"], _ = train(m3, torch.optim.Adam(m3.parameters(), lr=0.02))

# (2) SHARD_GRAD_OP with clip_grad_norm_; NO_SHARD with no_sync accumulation.
m4 = FSDP(make(), device_id=CPU, auto_wrap_policy=policy, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP)
R["grad_op_losses"], R["grad_op_norms"] = train(m4, torch.optim.SGD(m4.parameters(), lr=0.2), clip=0.5)
R["grad_op_sd"] = full_sd(m4)
m5 = FSDP(make(), device_id=CPU, auto_wrap_policy=policy, sharding_strategy=ShardingStrategy.NO_SHARD)
opt5 = torch.optim.SGD(m5.parameters(), lr=0.1)
acc_losses = []
for _ in range(2):
    opt5.zero_grad()
    with m5.no_sync():
        loss = nn.functional.mse_loss(m5(Xl[:per // 2]), Yl[:per // 2])
        loss.backward()
        acc_losses.append(loss.item())
    loss = nn.functional.mse_loss(m5(Xl[per // 2:]), Yl[per // 2:])
    loss.backward()
    acc_losses.append(loss.item())
    R.setdefault("inf_norms", []).append(float(m5.clip_grad_norm_(10.0, norm_type=float("inf"))))
    opt5.step()
R["no_sync_losses"] = acc_losses
R["no_sync_sd"] = full_sd(m5)

# summon_full_params: whole parameters, writeback of a change.
m6 = FSDP(make(), device_id=CPU, auto_wrap_policy=policy)
with FSDP.summon_full_params(m6):
    R["summoned"] = [[n, list(p.shape)] for n, p in m6.named_parameters()]
    with torch.no_grad():
        m6.module.head.bias.add_(1.0)
with torch.no_grad():
    R["after_writeback"] = m6(Xl).tolist()
with FSDP.summon_full_params(m6, writeback=False):
    with torch.no_grad():
        m6.module.head.bias.zero_()
if LIB != "torch":  # PyTorch's root keeps its gathered parameters after a no_grad forward and the change shows
    with torch.no_grad():
        R["after_no_writeback"] = m6(Xl).tolist()

# (3) bf16 mixed precision (fp32 reduction).
mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)
m7 = FSDP(make(), device_id=CPU, auto_wrap_policy=policy, mixed_precision=mp)
R["mp_losses"], _ = train(m7, torch.optim.SGD(m7.parameters(), lr=0.1))
R["mp_sd_dtypes"] = sorted({str(v.dtype).split(".")[-1] for v in m7.state_dict().values()})

# A weight shared by two modules of one unit (tied embedding / output) stays one parameter.
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 4)
        self.mid = nn.Linear(4, 4)
        self.out = nn.Linear(4, 6, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, t):
        return self.out(torch.tanh(self.mid(self.emb(t))))


lm = LM()
with torch.no_grad():
    for i, p in enumerate(lm.parameters()):
        p.copy_((torch.sin(torch.arange(p.numel(), dtype=torch.float32) + i) * 0.5).reshape(p.shape))
lm = FSDP(lm, device_id=CPU)
opt_lm = torch.optim.SGD(lm.parameters(), lr=0.5)
tokens = torch.tensor([[1, 2, 3], [4, 5, 0]])[rank % 2]
R["tied_losses"] = []
for _ in range(3):
    opt_lm.zero_grad()
    loss = nn.functional.cross_entropy(lm(tokens), (tokens + 1) % 6)
    loss.backward()
    opt_lm.step()
    R["tied_losses"].append(loss.item())
R["tied_sd"] = full_sd(lm, rank0_only=False)

# SHARDED_STATE_DICT through the distributed checkpoint, loaded into a fresh wrapped model.
if LIB == "torch":
    import torch.distributed.checkpoint as dcp
else:
    import ember.distributed.checkpoint as dcp
import os  # noqa: E402

ckpt = os.path.join(os.environ["DIST_OUT"], "fsdp1_ckpt")
with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
    dcp.save({"model": model.state_dict()}, checkpoint_id=ckpt)
restored = FSDP(Net(), device_id=CPU, auto_wrap_policy=policy)
with FSDP.state_dict_type(restored, StateDictType.SHARDED_STATE_DICT):
    holder = {"model": restored.state_dict()}
    dcp.load(holder, checkpoint_id=ckpt)
    restored.load_state_dict(holder["model"])
R["sharded_roundtrip"] = full_sd(restored, rank0_only=False)

if LIB != "torch":  # ember's own refusals of what it does not implement
    R["refused"] = [error_of(lambda: FSDP(make(), device_id=CPU, param_init_fn=lambda m: None)),
                    error_of(lambda: FSDP(make(), mixed_precision=MixedPrecision(keep_low_precision_grads=True))),
                    error_of(lambda: FSDP.set_state_dict_type(m6, StateDictType.LOCAL_STATE_DICT)),
                    error_of(lambda: FSDP(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)), mixed_precision=mp)),
                    error_of(lambda: FSDP(LM(), auto_wrap_policy=ModuleWrapPolicy({nn.Linear})))]
write(rank, R)
