"""Tensor parallelism (parallelize_module) on a mini-GPT block, against single-process training.

Every rank holds the whole batch (tensor parallelism splits the layers, not the data). Plan
"tp": attention q/k/v and the MLP's up projection colwise, the output projections rowwise.
Plan "sp": the same plus sequence parallelism (embedding rowwise to Shard(1), norms on sequence
shards, PrepareModuleInput gathering before attention and MLP, the head colwise from Shard(1)).
Each rank trains 3 SGD (momentum) steps and compares the full parameters with the plain model's.
"""

from prelude import LIB, init, torch, write

if LIB == "torch":
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        PrepareModuleInputOutput,
        RowwiseParallel,
        SequenceParallel,
        loss_parallel,
        parallelize_module,
    )
else:
    from ember.distributed.device_mesh import init_device_mesh
    from ember.distributed.tensor import DTensor, Replicate, Shard
    from ember.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        PrepareModuleInputOutput,
        RowwiseParallel,
        SequenceParallel,
        loss_parallel,
        parallelize_module,
    )

nn, F = torch.nn, torch.nn.functional
rank, world = init()
mesh = init_device_mesh("cpu", (world,))
V, D, H, S, B = 16, 8, 4, 6, 2


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (f(x).view(b, s, -1, D // H).transpose(1, 2) for f in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True) if LIB == "ember" else _attention(q, k, v)
        return self.o(a.transpose(1, 2).reshape(b, s, -1))


def _attention(q, k, v):
    # PyTorch's DTensor has no CPU rule for its fused attention: the same math spelled out.
    scores = (q @ k.transpose(-2, -1)) / (D // H) ** 0.5
    mask = torch.ones(S, S, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ v


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(D), Attention(), nn.LayerNorm(D), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.block, self.lnf, self.head = nn.Embedding(V, D), Block(), nn.LayerNorm(D), nn.Linear(D, V)

    def forward(self, idx):
        return self.head(self.lnf(self.block(self.emb(idx))))


def make():
    torch.manual_seed(3)
    return GPT()


TP = {"block.attn.q": ColwiseParallel(), "block.attn.k": ColwiseParallel(), "block.attn.v": ColwiseParallel(),
      "block.attn.o": RowwiseParallel(), "block.mlp.up": ColwiseParallel(), "block.mlp.down": RowwiseParallel()}
gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
SP = {**TP, "emb": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
      "block.ln1": SequenceParallel(), "block.ln2": SequenceParallel(), "lnf": SequenceParallel(),
      "block.attn": gather, "block.mlp": gather,
      "block.attn.o": RowwiseParallel(output_layouts=Shard(1)),
      "block.mlp.down": RowwiseParallel(output_layouts=Shard(1)),
      "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())}

torch.manual_seed(99)
IDX = torch.randint(0, V, (B, S))
TARGET = torch.randint(0, V, (B, S))


def train(model, steps=3):
    # SGD with momentum: Adam would turn rounding-level gradients into full-size steps.
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model(IDX)
        if isinstance(logits, DTensor):
            logits = logits.full_tensor()
        loss = F.cross_entropy(logits.reshape(-1, V), TARGET.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(round(float(loss), 5))
    return losses


def full(model):
    return {n: (p.full_tensor() if isinstance(p, DTensor) else p.detach()) for n, p in model.named_parameters()}


ref = make()
ref_losses = train(ref)
R = {}
for name, plan in (("tp", TP), ("sp", SP)):
    model = parallelize_module(make(), mesh, plan)
    R[f"{name}/layouts"] = {n: [str(q) for q in p.placements] for n, p in model.named_parameters()
                            if isinstance(p, DTensor)}
    losses = train(model)
    R[f"{name}/losses_close"] = all(abs(a - b) < 1e-4 for a, b in zip(losses, ref_losses))
    got, want = full(model), full(ref)
    R[f"{name}/params_close"] = all(bool(torch.allclose(got[n], want[n], rtol=1e-4, atol=1e-5)) for n in want)
# loss_parallel: cross-entropy of logits sharded on the class dimension, plain targets replicated
head = nn.Linear(8, 6)
with torch.no_grad():
    head.weight.copy_(torch.sin(torch.arange(48.0).reshape(6, 8)))
    head.bias.copy_(torch.cos(torch.arange(6.0)))
head = parallelize_module(head, mesh, ColwiseParallel(use_local_output=False))
logits = head(torch.cos(torch.arange(64.0).reshape(8, 8)))
with loss_parallel():
    loss = F.cross_entropy(logits, torch.tensor([0, 1, 2, 3, 4, 5, 0, 1]))
    loss.backward()
R["loss_parallel"] = [type(loss).__name__, str(loss.placements), round(float(loss.full_tensor()), 5),
                      str(head.weight.grad.placements),
                      [round(v, 5) for v in head.weight.grad.full_tensor().reshape(-1).tolist()]]
# PrepareModuleInputOutput: a batch shard gathered in (as plain input), the output sharded on dim 1
norm = nn.LayerNorm(8)
io = parallelize_module(norm, mesh, PrepareModuleInputOutput(
    input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),), use_local_input=True,
    output_layouts=(Replicate(),), desired_output_layouts=(Shard(1),), use_local_output=False))
x_io = torch.cos(torch.arange(64.0).reshape(2, 4, 8))
out_io = io(x_io.chunk(world, dim=0)[rank])
R["prepare_io"] = [type(out_io).__name__, str(out_io.placements), list(out_io.shape),
                   bool(torch.allclose(out_io.full_tensor(), nn.functional.layer_norm(x_io, (8,)), atol=1e-6))]
write(rank, R)
