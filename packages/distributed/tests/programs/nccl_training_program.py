"""DDP and FSDP2 on CUDA over NCCL against single-GPU training on the full batch.

A mini-GPT (token and position embeddings, two pre-norm attention + MLP blocks, a head) trains 5
SGD (momentum) steps; every rank holds ``B / world`` sequences of the batch. DDP and FSDP2 (every
block and the root) must end with the parameters of the plain model trained on the whole batch on
this rank's GPU (rtol 1e-4 in float32). Any world size (1 GPU: the NCCL path with one rank).
"""

import os
import traceback
from datetime import timedelta

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

from prelude import write  # noqa: E402

import ember as torch  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember.distributed.fsdp import fully_shard  # noqa: E402
from ember.distributed.tensor import DTensor  # noqa: E402
from ember.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
dist.init_process_group("nccl", timeout=timedelta(seconds=120))
rank, world = dist.get_rank(), dist.get_world_size()
DEV = f"cuda:{local}"
nn, F = torch.nn, torch.nn.functional
V, D, H, S, B, STEPS = 32, 16, 2, 8, 4, 5


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.up, self.down = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (t.view(b, s, H, D // H).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, D)
        x = x + self.proj(a)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(V, D), nn.Embedding(S, D)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.lnf, self.head = nn.LayerNorm(D), nn.Linear(D, V)

    def forward(self, idx):
        x = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))


def make():
    torch.manual_seed(7)
    return GPT().to(DEV)


torch.manual_seed(11)
IDX = torch.randint(0, V, (B, S)).to(DEV)
TGT = torch.randint(0, V, (B, S)).to(DEV)
per = B // world
mine = slice(rank * per, (rank + 1) * per)


def train(model, idx, tgt, opt):
    for _ in range(STEPS):
        opt.zero_grad()
        F.cross_entropy(model(idx).reshape(-1, V), tgt.reshape(-1)).backward()
        opt.step()


def params(model):
    return [(p.full_tensor() if isinstance(p, DTensor) else p.detach()).cpu() for p in model.parameters()]


def compare(got, want):
    worst = 0.0
    for a, b in zip(got, want):
        if not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
            worst = max(worst, float((a - b).abs().max()))
    return True if worst == 0.0 else f"max abs diff {worst}"


R = {}


def recorded(name, fn):
    """Runs one scenario; a failure is recorded as its text (the other scenario still runs)."""
    try:
        R[name] = fn()
    except Exception:  # noqa: BLE001 - the test shows what failed
        R[name] = traceback.format_exc(limit=6)[-2000:]


plain_sgd = make()
train(plain_sgd, IDX, TGT, torch.optim.SGD(plain_sgd.parameters(), lr=0.1, momentum=0.9))
want = params(plain_sgd)


def ddp_run():
    ddp = DDP(make(), device_ids=[local], bucket_cap_mb=0.01)  # small buckets: several all-reduces overlap backward
    R["ddp_buckets"] = len(ddp._buckets)
    train(ddp, IDX[mine], TGT[mine], torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9))
    return compare(params(ddp.module), want)


def fsdp_run():
    sharded = make()
    for block in sharded.blocks:
        fully_shard(block)
    fully_shard(sharded)
    train(sharded, IDX[mine], TGT[mine], torch.optim.SGD(sharded.parameters(), lr=0.1, momentum=0.9))
    return compare(params(sharded), want)


recorded("ddp_matches_full_batch", ddp_run)
recorded("fsdp_matches_full_batch", fsdp_run)
dist.destroy_process_group()
write(rank, R)
