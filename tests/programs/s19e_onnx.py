# torch.onnx.export with dynamo=True and dynamo=False, judged by ONNX Runtime against eager.
import io

import numpy as np
import onnxruntime as ort
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.tanh(self.fc1(x))), dim=-1)


model = seed_free_init(Small().eval(), 6)
x = data((4, 5), 2)


def ort_run(model_bytes, inp):
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return sess.run(None, {name: inp.numpy()})[0]


buf = io.BytesIO()
torch.onnx.export(model, (x,), buf, dynamo=False, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}})
for n in (4, 9):
    inp = data((n, 5), n)
    print("legacy", n, np.allclose(ort_run(buf.getvalue(), inp), model(inp).detach().numpy(), atol=1e-5))
prog = torch.onnx.export(model, (x,), dynamo=True, dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
mb = prog.model_proto.SerializeToString()
for n in (4, 7):
    inp = data((n, 5), n)
    print("dynamo", n, np.allclose(ort_run(mb, inp), model(inp).detach().numpy(), atol=1e-5))
