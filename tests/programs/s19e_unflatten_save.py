# torch.export.unflatten keeps the module hierarchy; save/load through a buffer and a file keeps the
# program, its dims and extra files.
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
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x


class Top(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


top = seed_free_init(Top(), 11)
x = data((3, 4), 3)
ep = export(top, (x,), dynamic_shapes={"x": {0: Dim("batch")}})
uf = torch.export.unflatten(ep)
print("unflat", torch.allclose(uf(x), top(x), atol=1e-6))
print("children", [name for name, _ in uf.named_children()])
print("block alone", torch.allclose(getattr(uf.blocks, "1")(x), top.blocks[1](x), atol=1e-6))
print("fqns", sorted(dict(uf.named_parameters()))[:3])
buf = io.BytesIO()
torch.export.save(ep, buf, extra_files={"note.txt": "hello"})
buf.seek(0)
extra = {"note.txt": ""}
loaded = torch.export.load(buf, extra_files=extra)
print("loaded", torch.allclose(loaded.module()(data((7, 4), 1)), top(data((7, 4), 1)), atol=1e-6), extra)
print("loaded ranges", sorted(str(v) for v in loaded.range_constraints.values()))
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "model.pt2")
    torch.export.save(ep, path)
    again = torch.export.load(path)
    print("file", torch.allclose(again.module()(x), top(x), atol=1e-6))
try:
    loaded.module()(torch.randn(3, 5))
except Exception as e:
    print("loaded bad", type(e).__name__)
try:
    torch.export.load(io.BytesIO(b"not a zip"))
except Exception as e:
    print("bad file", isinstance(e, Exception))
