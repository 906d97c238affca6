# torch.export.save/load round trip of a small transformer-ish block with a dynamic batch, through a
# BytesIO and a file; run_decompositions() (default table and an empty one) keeps the answers; the
# ExportedProgram's graph signature printed (parameters, buffers, user inputs/outputs); the loaded program's
# state and ranges equal the original's.
import io
import os
import tempfile

import torch
import torch.nn as nn
from _seedfree import data, seed_free_init
from torch.export import Dim, export


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x):
        h = self.ln(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        return x + self.ff(x) * self.scale


blk = seed_free_init(Block().eval(), 8)
x = data((2, 5, 8), 1)
ep = export(blk, (x,), dynamic_shapes={"x": {0: Dim("batch", max=64)}})
sig = ep.graph_signature
print("params", sig.parameters)
print("buffers", sig.buffers)
print("user inputs", sig.user_inputs, "user outputs", sig.user_outputs)
print("input kinds", [s.kind.name for s in sig.input_specs])
text = str(sig)
print("signature text", [line.split(":")[0].strip() for line in text.splitlines() if ":" in line][:3])
buf = io.BytesIO()
torch.export.save(ep, buf)
buf.seek(0)
loaded = torch.export.load(buf)
x3 = data((3, 5, 8), 2)
print("loaded", torch.allclose(loaded.module()(x3), blk(x3), atol=1e-5))
print("loaded state", sorted(loaded.state_dict) == sorted(ep.state_dict),
      all(torch.equal(loaded.state_dict[k], ep.state_dict[k]) for k in ep.state_dict))
print("loaded ranges", sorted(str(v) for v in loaded.range_constraints.values()))
print("loaded signature", loaded.graph_signature.user_inputs, len(loaded.graph_signature.input_specs))
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "blk.pt2")
    torch.export.save(ep, path)
    again = torch.export.load(path)
    print("file", torch.allclose(again.module()(x), blk(x), atol=1e-5), os.path.getsize(path) > 0)
dec = ep.run_decompositions()
print("decomposed", torch.allclose(dec.module()(x3), blk(x3), atol=1e-5))
kept = ep.run_decompositions({})
print("empty table", torch.allclose(kept.module()(x3), blk(x3), atol=1e-5))
print("decomposed params", dec.graph_signature.parameters == sig.parameters)
buf2 = io.BytesIO()
torch.export.save(dec, buf2)
buf2.seek(0)
print("decomposed round trip", torch.allclose(torch.export.load(buf2).module()(x3), blk(x3), atol=1e-5))
try:
    loaded.module()(data((3, 6, 8), 2))
except Exception as e:
    print("loaded bad seq", type(e).__name__)
