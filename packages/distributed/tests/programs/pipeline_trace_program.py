"""pipeline() on modules that are not nn.Sequential: the model is traced and cut into stages, and
the schedules train them. Run under PyTorch (gloo) and ember, each rank reports its stages'
parameter names, the last stage's losses, and every parameter's gradient after the third step,
which the test compares.

- "gpt": a small GPT (token and position embeddings, pre-norm blocks with causal attention
  whose mask is a buffer, a skip connection from the embeddings over every block to the head),
  cut with split_spec at blocks: 2 stages (GPipe, 1F1B) and, at 2 ranks, 4 stages, two per
  rank (ScheduleInterleaved1F1B); at 4 ranks 4 stages (1F1B). Over 4 stages the skip crosses
  two stages, which PyTorch's schedules refuse (multi-stage) or hang on (1F1B): there PyTorch
  runs the model without the skip through its schedules, and the model with it is compared with
  PyTorch's whole-batch training of the same model (same losses and gradients).
- "kw": a model with a keyword argument and a buffer, cut by a pipe_split() call in its forward
  (2 stages, GPipe).
"""

import math
import sys

from prelude import LIB, encode, init, torch, write

if LIB == "torch":
    from torch.distributed.pipelining import (
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
        SplitPoint,
        pipe_split,
        pipeline,
    )
else:
    from ember.distributed.pipelining import (
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
        SplitPoint,
        pipe_split,
        pipeline,
    )

nn = torch.nn
F = nn.functional
rank, world = init()
WHICH = sys.argv[1:] or ["gpt", "kw"]
V, T, D, BLOCKS, B, MB = 11, 5, 8, 4, 8, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, 2 * D)
        self.out = nn.Linear(2 * D, D)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).bool())

    def forward(self, h):
        q, k, v = self.qkv(self.ln1(h)).split(D, dim=-1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~self.mask, float("-inf")).softmax(-1)
        h = h + self.proj(att @ v)
        return h + self.out(F.gelu(self.fc(self.ln2(h))))


class GPT(nn.Module):
    def __init__(self, skip=True):
        super().__init__()
        self.skip = skip
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Parameter(torch.randn(T, D) * 0.1)
        self.blocks = nn.ModuleList([Block() for _ in range(BLOCKS)])
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)

    def forward(self, idx):
        e = self.tok(idx) + self.pos
        h = e
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h) + e) if self.skip else self.head(self.ln_f(h))  # e skips every block


class KW(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 12)
        self.b = nn.Linear(12, 12)
        self.c = nn.Linear(12, 4)
        self.register_buffer("shift", torch.linspace(-1, 1, 12))

    def forward(self, x, scale=None):
        h = torch.tanh(self.a(x))
        if scale is not None:
            h = h * scale
        pipe_split()
        h = torch.tanh(self.b(h)) + self.shift
        return self.c(h)


def gpt_loss(out, target):
    return F.cross_entropy(out.reshape(-1, V), target.reshape(-1))


torch.manual_seed(3)
IDX, TGT = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
X, SCALE, Y = torch.randn(B, 6), torch.rand(B, 12) + 0.5, torch.randn(B, 4)
R = {}


def train_reference(label, make, split_spec, stages_per_rank, inputs, kwargs, target, loss_fn, steps):
    """PyTorch's model trained on the whole batch (the loss a mean over equal microbatches): the
    steps a pipeline schedule must take, where PyTorch's schedules refuse the model."""
    torch.manual_seed(0)
    model = make()
    mb_args = tuple(t[: B // MB] for t in inputs)
    mb_kwargs = {k: t[: B // MB] for k, t in kwargs.items()}
    pipe = pipeline(make(), mb_args, mb_kwargs, split_spec=split_spec)  # for the stages' parameter names
    mine = [rank + world * j for j in range(stages_per_rank)]
    modules = [pipe.get_stage_module(i) for i in mine]
    named = dict(model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(*inputs, **kwargs), target)
        loss.backward()
        losses.append(float(loss))
        grads = {f"{i}:{name}": encode(named[name].grad) for i, m in zip(mine, modules)
                 for name, _ in m.named_parameters()}
        opt.step()
    last = pipe.num_stages - 1
    R[label] = {"num_stages": pipe.num_stages, "names": {str(i): [name for name, _ in m.named_parameters()]
                                                         for i, m in zip(mine, modules)},
                "buffers": {str(i): [name for name, _ in m.named_buffers()] for i, m in zip(mine, modules)},
                "children": [name for name, _ in pipe.split_gm.named_children()],
                "losses": losses if last in mine else [], "grads": grads}


def train(label, make, split_spec, schedule_cls, stages_per_rank, inputs, kwargs, target, loss_fn, steps=3,
          reference=False):
    if LIB == "torch" and reference:
        return train_reference(label, make, split_spec, stages_per_rank, inputs, kwargs, target, loss_fn, steps)
    torch.manual_seed(0)
    model = make()
    mb_args = tuple(t[: B // MB] for t in inputs)
    mb_kwargs = {k: t[: B // MB] for k, t in kwargs.items()}
    pipe = pipeline(model, mb_args, mb_kwargs, split_spec=split_spec)
    n = pipe.num_stages
    mine = [rank + world * j for j in range(stages_per_rank)]
    stages = [pipe.build_stage(i, torch.device("cpu")) for i in mine]
    if stages_per_rank == 1:
        schedule = schedule_cls(stages[0], n_microbatches=MB, loss_fn=loss_fn)
    else:
        schedule = schedule_cls(stages, n_microbatches=MB, loss_fn=loss_fn)
    modules = [pipe.get_stage_module(i) for i in mine]
    params = [p for m in modules for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        step_losses = []
        if 0 in mine and n - 1 in mine:
            schedule.step(*inputs, target=target, losses=step_losses, **kwargs)
        elif 0 in mine:
            schedule.step(*inputs, **kwargs)
        elif n - 1 in mine:
            schedule.step(target=target, losses=step_losses)
        else:
            schedule.step()
        if step_losses:
            losses.append(float(sum(step_losses) / len(step_losses)))
        grads = {f"{i}:{name}": encode(p.grad) for i, m in zip(mine, modules) for name, p in m.named_parameters()}
        opt.step()
    R[label] = {"num_stages": n, "names": {str(i): [name for name, _ in m.named_parameters()]
                                           for i, m in zip(mine, modules)},
                "buffers": {str(i): [name for name, _ in m.named_buffers()] for i, m in zip(mine, modules)},
                "children": [name for name, _ in pipe.split_gm.named_children()],
                "losses": losses, "grads": grads}


gpt_inputs = ((IDX,), {}, TGT, gpt_loss)
if "gpt" in WHICH:
    if world == 2:
        spec2 = {"blocks.2": SplitPoint.BEGINNING}
        train("gpt2_gpipe", GPT, spec2, ScheduleGPipe, 1, *gpt_inputs)
        train("gpt2_1f1b", GPT, spec2, Schedule1F1B, 1, *gpt_inputs)
    spec4 = {f"blocks.{i}": SplitPoint.BEGINNING for i in (1, 2, 3)}
    if world == 2:
        # PyTorch's multi-stage schedules refuse a skip over stages (non-adjacent communication): its
        # run of the model without the skip is the oracle there, and for the skip its whole-batch training
        train("gpt4_interleaved", lambda: GPT(skip=False), spec4, ScheduleInterleaved1F1B, 2, *gpt_inputs)
        train("gpt4_interleaved_skip", GPT, spec4, ScheduleInterleaved1F1B, 2, *gpt_inputs, reference=True)
    else:  # PyTorch's 1F1B hangs on the skip over stages (its sends to stage 3 never complete): likewise
        train("gpt4_1f1b", lambda: GPT(skip=False), spec4, Schedule1F1B, 1, *gpt_inputs)
        train("gpt4_1f1b_skip", GPT, spec4, Schedule1F1B, 1, *gpt_inputs, reference=True)
if "kw" in WHICH and world == 2:
    train("kw2_gpipe", KW, None, ScheduleGPipe, 1, (X,), {"scale": SCALE}, Y, F.mse_loss)
write(rank, R)
