# Constraint violations at export time: a Dim the code specializes, a range the code narrows, a static dim
# marked dynamic, and the suggested fixes' exception types.
import torch
from torch.export import Dim, export


class Specializes(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 4:
            return x + 1
        return x - 1


class Narrows(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 3:
            return x[:3]
        return x


class Reshape(torch.nn.Module):
    def forward(self, x):
        return x.reshape(2, -1, 4)


cases = [
    ("specialize", Specializes(), (torch.randn(4, 2),), {"x": {0: Dim("b")}}),
    ("narrow", Narrows(), (torch.randn(5, 2),), {"x": {0: Dim("b")}}),
    ("narrow auto", Narrows(), (torch.randn(5, 2),), {"x": {0: Dim.AUTO}}),
    ("reshape", Reshape(), (torch.randn(2, 8),), {"x": {1: Dim("c")}}),
    ("reshape min", Reshape(), (torch.randn(2, 8),), {"x": {1: Dim("c", min=4)}}),
    ("bad key", Specializes(), (torch.randn(4, 2),), {"y": {0: Dim("b")}}),
    ("bad dim", Specializes(), (torch.randn(4, 2),), {"x": {5: Dim("b")}}),
    ("bad min", Specializes(), (torch.randn(4, 2),), {"x": {0: Dim("b", min=5)}}),
]
for name, mod, args, shapes in cases:
    try:
        ep = export(mod, args, dynamic_shapes=shapes)
        print(name, "exported", sorted(str(v) for v in ep.range_constraints.values()))
    except Exception as e:
        print(name, "raised", type(e).__name__)
try:
    Dim("bad", min=5, max=2)
except Exception as e:
    print("Dim range", type(e).__name__)
