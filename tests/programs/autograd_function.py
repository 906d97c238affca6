# torch.autograd.Function subclasses: save_for_backward, needs_input_grad, mark_dirty (in-place),
# mark_non_differentiable, set_materialize_grads, once_differentiable, the setup_context form,
# double backward through a Function, gradcheck, and apply on non-tensor arguments.
import torch
from torch.autograd import Function, gradcheck
from torch.autograd.function import once_differentiable


class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class MulConstant(Function):
    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.constant = inputs[1]

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


class InplaceDouble(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def backward(ctx, g):
        return g * 2


class SortWithIndices(Function):
    @staticmethod
    def forward(ctx, x):
        values, idx = x.sort()
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return values, idx

    @staticmethod
    @once_differentiable
    def backward(ctx, g_values, g_idx):
        (idx,) = ctx.saved_tensors
        out = torch.zeros_like(g_values)
        out.scatter_(-1, idx, g_values)
        return out


class TwoOutputs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx, g1, g2):
        print("  grads None?", g1 is None, g2 is None)
        if g1 is None:
            return g2 * 3
        return g1 if g2 is None else g1 + g2


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


torch.manual_seed(0)
x = torch.randn(4, 3, dtype=torch.double, requires_grad=True)
w = torch.randn(2, 3, dtype=torch.double, requires_grad=True)
b = torch.randn(2, dtype=torch.double, requires_grad=True)
print("gradcheck linear", gradcheck(LinearFunction.apply, (x, w, b), eps=1e-6, atol=1e-4))
out = LinearFunction.apply(x, w)
out.sum().backward()
print("grad w", w.grad.numpy().round(6).tolist(), type(out.grad_fn).__name__)
y = MulConstant.apply(x, 2.5)
y.sum().backward()
print("mulconstant", x.grad[0].tolist(), y.requires_grad)
a = torch.randn(3, requires_grad=True)
c = a.clone()
d = InplaceDouble.apply(c)
print("mark_dirty same object", d is c, c._version > 0)
d.pow(2).sum().backward()
print("inplace grad", a.grad.numpy().round(6).tolist())
v = torch.tensor([3.0, 1.0, 2.0], requires_grad=True)
vals, idx = SortWithIndices.apply(v)
print("non-diff", idx.requires_grad, vals.requires_grad, idx.tolist())
(vals * torch.tensor([1.0, 10.0, 100.0])).sum().backward()
print("sort grad", v.grad.tolist())
try:
    vals2, _ = SortWithIndices.apply(v)
    g, = torch.autograd.grad(vals2.sum(), v, create_graph=True)
    g.sum().backward()
except RuntimeError as e:
    print("once_differentiable double backward: RuntimeError", str(e)[:60])
p = torch.tensor([1.0, 2.0], requires_grad=True)
o1, o2 = TwoOutputs.apply(p)
o2.sum().backward()
print("materialize", p.grad.tolist())
z = torch.tensor([1.5, -2.0], dtype=torch.double, requires_grad=True)
(gz,) = torch.autograd.grad(Cube.apply(z).sum(), z, create_graph=True)
gz.sum().backward()
print("double backward", gz.tolist(), z.grad.tolist())
with torch.no_grad():
    print("no_grad apply", LinearFunction.apply(x, w, b).requires_grad)
