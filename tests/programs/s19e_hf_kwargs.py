# Exporting an HF-style module called with keyword arguments: an optional mask (None or a tensor), a dict
# output, kwargs dynamic shapes keyed by name, Dim.STATIC, ShapesCollection, and the exported module called
# with the same keywords.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init
from torch.export import Dim, ShapesCollection, export


class TinyEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.proj = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, input_ids, attention_mask=None, scale: float = 1.0):
        h = self.emb(input_ids)
        scores = h @ h.transpose(1, 2) / (8 ** 0.5)
        if attention_mask is not None:
            scores = scores.masked_fill(attention_mask[:, None, :] == 0, float("-inf"))
        h = F.softmax(scores, -1) @ h
        h = self.norm(self.proj(h) * scale + h)
        return {"last_hidden_state": h, "pooled": h.mean(1)}


model = seed_free_init(TinyEncoder().eval(), 4)
ids = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 0]])
mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
seq = Dim("seq", min=2, max=32)
ep = export(model, (), {"input_ids": ids, "attention_mask": mask},
            dynamic_shapes={"input_ids": {1: seq}, "attention_mask": {1: seq}})
print("user inputs", ep.graph_signature.user_inputs)
out = ep.module()(input_ids=ids, attention_mask=mask)
ref = model(input_ids=ids, attention_mask=mask)
print("keys", sorted(out), all(torch.allclose(out[k], ref[k], atol=1e-5) for k in out))
ids6 = torch.arange(12).reshape(2, 6) % 20
mask6 = torch.ones(2, 6, dtype=torch.long)
out6 = ep.module()(input_ids=ids6, attention_mask=mask6)
print("seq 6", tuple(out6["last_hidden_state"].shape),
      torch.allclose(out6["pooled"], model(input_ids=ids6, attention_mask=mask6)["pooled"], atol=1e-5))
ep_nomask = export(model, (ids,), dynamic_shapes={"input_ids": {0: Dim.STATIC, 1: Dim.AUTO}})
print("no mask", torch.allclose(ep_nomask.module()(ids6)["pooled"], model(ids6)["pooled"], atol=1e-5))
try:
    ep_nomask.module()(torch.zeros(3, 4, dtype=torch.long))
except Exception as e:
    print("static batch", type(e).__name__, str(e).splitlines()[0])
sc = ShapesCollection()
sc[ids] = {1: Dim("s")}
ep_sc = export(model, (ids,), dynamic_shapes=sc)
print("shapes collection", sorted(str(v) for v in ep_sc.range_constraints.values()))
ep_scale = export(model, (ids,), {"scale": 0.5})
print("float kwarg", torch.allclose(ep_scale.module()(ids, scale=0.5)["pooled"], model(ids, scale=0.5)["pooled"],
                                    atol=1e-5))
try:
    ep_scale.module()(ids, scale=2.0)
except Exception as e:
    print("other float", type(e).__name__)
x = data((2, 4, 8), 1)
print("data", round(float(x.sum()), 4))
