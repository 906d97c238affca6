"""PyTorch's "Introduction to Distributed Pipeline Parallelism" tutorial, smaller: a Transformer
whose layers are an nn.ModuleDict, split by hand (deleting the other stage's layers, then
PipelineStage) and run with ScheduleGPipe over microbatches, a tokenwise cross-entropy; then one
SGD step. argv[1] == "tracer": split with pipeline(..., split_spec={"layers.2": BEGINNING}) as
the tutorial's second variant does (ember traces the model with ember-export's tracer). Reports
rank 1's losses and output and each stage's parameters after the step."""

import sys
from dataclasses import dataclass

from prelude import LIB, dist, init, torch, write

if LIB == "torch":
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, SplitPoint, pipeline
else:
    from ember.distributed.pipelining import PipelineStage, ScheduleGPipe, SplitPoint, pipeline

nn = torch.nn


@dataclass
class ModelArgs:
    dim: int = 32
    n_layers: int = 4
    n_heads: int = 4
    vocab_size: int = 50


class Transformer(nn.Module):
    def __init__(self, model_args: ModelArgs):
        super().__init__()
        self.tok_embeddings = nn.Embedding(model_args.vocab_size, model_args.dim)
        # ModuleDict, so that deleting layers keeps the names (and checkpoints) stable
        self.layers = torch.nn.ModuleDict()
        for layer_id in range(model_args.n_layers):
            self.layers[str(layer_id)] = nn.TransformerDecoderLayer(model_args.dim, model_args.n_heads, dropout=0.0)
        self.norm = nn.LayerNorm(model_args.dim)
        self.output = nn.Linear(model_args.dim, model_args.vocab_size)

    def forward(self, tokens: torch.Tensor):
        h = self.tok_embeddings(tokens) if self.tok_embeddings else tokens
        for layer in self.layers.values():
            h = layer(h, h)
        h = self.norm(h) if self.norm else h
        output = self.output(h).clone() if self.output else h
        return output


rank, world = init()
stage_index, num_stages = rank, world
device = torch.device("cpu")
num_microbatches = 4
model_args = ModelArgs()
torch.manual_seed(0)
model = Transformer(model_args)
x = torch.ones(8, 16, dtype=torch.long)
torch.manual_seed(1)
y = torch.randint(0, model_args.vocab_size, (8, 16), dtype=torch.long)


def tokenwise_loss_fn(outputs, targets):
    loss_fn = nn.CrossEntropyLoss()
    outputs = outputs.reshape(-1, model_args.vocab_size)
    targets = targets.reshape(-1)
    return loss_fn(outputs, targets)


def manual_model_split(model) -> PipelineStage:
    if stage_index == 0:
        for i in range(2, 4):
            del model.layers[str(i)]
        model.norm = None
        model.output = None
    elif stage_index == 1:
        for i in range(2):
            del model.layers[str(i)]
        model.tok_embeddings = None
    return PipelineStage(model, stage_index, num_stages, device)


def tracer_model_split(model) -> PipelineStage:
    x_mb = x.chunk(num_microbatches)[0]
    pipe = pipeline(module=model, mb_args=(x_mb,), split_spec={"layers.2": SplitPoint.BEGINNING})
    return pipe.build_stage(stage_index, device, None)


stage = tracer_model_split(model) if sys.argv[1:] == ["tracer"] else manual_model_split(model)
optimizer = torch.optim.SGD(stage.submod.parameters(), lr=0.1)
schedule = ScheduleGPipe(stage, n_microbatches=num_microbatches, loss_fn=tokenwise_loss_fn)
R = {}
optimizer.zero_grad()
if rank == 0:
    schedule.step(x)
else:
    losses = []
    output = schedule.step(target=y, losses=losses)
    R["losses"] = [loss.item() for loss in losses]
    R["output"] = [list(output.shape), output.sum().item()]
optimizer.step()
R["params"] = {name: p.detach().double().sum().item() for name, p in stage.submod.named_parameters()}
dist.destroy_process_group()
write(rank, R)
