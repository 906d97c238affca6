# ONNX export of a small conv classifier and a GRU-free sequence model, with dynamo=True (dynamic_shapes)
# and the classic path (dynamic_axes), judged by onnxruntime against eager at several batch sizes; input
# and output names, symbolic dims in the model's inputs, and the opset.
import io

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, img):
        h = F.max_pool2d(F.relu(self.bn(self.conv(img))), 2)
        return F.log_softmax(self.fc(h.flatten(1)), -1)


class SeqPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.proj = nn.Linear(8, 4)

    def forward(self, ids, mask):
        h = self.emb(ids) * mask.unsqueeze(-1)
        pooled = h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return torch.tanh(self.proj(pooled))


def ort_session(model_bytes):
    return ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])


def dims(model_bytes):
    m = onnx.load_from_string(model_bytes)
    return [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input]


clf = seed_free_init(Classifier().eval(), 3)
img = data((2, 1, 8, 8), 1)
buf = io.BytesIO()
torch.onnx.export(clf, (img,), buf, dynamo=False, input_names=["img"], output_names=["logp"],
                  dynamic_axes={"img": {0: "batch"}, "logp": {0: "batch"}}, opset_version=17)
legacy = buf.getvalue()
sess = ort_session(legacy)
print("legacy names", [i.name for i in sess.get_inputs()], [o.name for o in sess.get_outputs()])
print("legacy dims", dims(legacy), onnx.load_from_string(legacy).opset_import[0].version)
for n in (1, 2, 5):
    inp = data((n, 1, 8, 8), n)
    got = sess.run(None, {"img": inp.numpy()})[0]
    print("legacy", n, got.shape, np.allclose(got, clf(inp).detach().numpy(), atol=1e-5))

prog = torch.onnx.export(clf, (img,), dynamo=True, input_names=["img"],
                         dynamic_shapes={"img": {0: torch.export.Dim("batch", max=64)}})
mb = prog.model_proto.SerializeToString()
sess2 = ort_session(mb)
print("dynamo names", [i.name for i in sess2.get_inputs()], len(sess2.get_outputs()))
print("dynamo batch symbolic", isinstance(dims(mb)[0][0], str), dims(mb)[0][1:])
for n in (3, 7):
    inp = data((n, 1, 8, 8), n)
    got = sess2.run(None, {"img": inp.numpy()})[0]
    print("dynamo", n, got.shape, np.allclose(got, clf(inp).detach().numpy(), atol=1e-5))

seq = seed_free_init(SeqPool().eval(), 4)
ids = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
mask = (ids != 0).float()
buf = io.BytesIO()
torch.onnx.export(seq, (ids, mask), buf, dynamo=False, input_names=["ids", "mask"], output_names=["out"],
                  dynamic_axes={"ids": {0: "b", 1: "t"}, "mask": {0: "b", 1: "t"}})
sess3 = ort_session(buf.getvalue())
print("seq dims", dims(buf.getvalue()))
for b, t in ((2, 4), (3, 7)):
    ids_n = (torch.arange(b * t).reshape(b, t) * 7) % 30
    mask_n = (ids_n % 4 != 0).float()
    got = sess3.run(None, {"ids": ids_n.numpy(), "mask": mask_n.numpy()})[0]
    print("seq", b, t, np.allclose(got, seq(ids_n, mask_n).detach().numpy(), atol=1e-5))
prog2 = torch.onnx.export(seq, (ids, mask), dynamo=True,
                          dynamic_shapes=({0: torch.export.Dim("b"), 1: torch.export.Dim("t")},
                                          {0: torch.export.Dim("b"), 1: torch.export.Dim("t")}))
sess4 = ort_session(prog2.model_proto.SerializeToString())
names = [i.name for i in sess4.get_inputs()]
ids_n = (torch.arange(15).reshape(3, 5) * 3) % 30
mask_n = torch.ones(3, 5)
got = sess4.run(None, dict(zip(names, (ids_n.numpy(), mask_n.numpy()))))[0]
print("seq dynamo", np.allclose(got, seq(ids_n, mask_n).detach().numpy(), atol=1e-5))
