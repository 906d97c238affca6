"""The C versions of the CNN extern ops for the AOT library's ``ember_aoti_run`` (a mixin of
``_aoti_c.CWriter``): 2-d ``convolution``, eval-mode ``native_batch_norm``,
``max_pool2d_with_indices`` and ``_adaptive_avg_pool2d``, float32, calling the C functions of
``_aoti_runtime_c.EXTERNS``."""

from __future__ import annotations

import ember
from ember.compiler.inductor._ir import Buffer, contiguous_strides, product


class NNExterns:
    def _f32(self, *ops):
        if any(o is not None and o.dtype is not ember.float32 for o in ops):
            raise _unsupported("a float32-only C extern met another dtype")

    def _opt(self, obj):
        return None if obj is None else _operand(obj, self.name)

    def _x_convolution(self, call, out):
        x, weight = self._ops(call, 2)
        bias = self._opt(call.args[2])
        stride, padding, dilation, transposed, _output_padding, groups = call.args[3:9]
        if transposed or len(x.shape) != 4:
            raise _unsupported("convolution other than 2-d and not transposed")
        self._f32(x, weight, bias)
        pad = list(padding) if not isinstance(padding, str) else None
        if pad is None:
            raise _unsupported("convolution with string padding")
        w = self.lines
        w.append("    { int64_t sx[4] = {" + ", ".join(_c(s) for s in x.strides) + "}, sw[4] = {"
                 + ", ".join(_c(s) for s in weight.strides) + "};")
        w.append(f"      ember_conv2d_f32({', '.join(_c(s) for s in x.shape)}, {x.ptr}, sx, {_c(weight.shape[0])}, "
                 f"{_c(weight.shape[2])}, {_c(weight.shape[3])}, {weight.ptr}, sw, "
                 f"{bias.ptr if bias else 'NULL'}, {_c(bias.strides[0]) if bias else 0}, {_c(out.shape[2])}, "
                 f"{_c(out.shape[3])}, {_c(stride[0])}, {_c(stride[1])}, {_c(pad[0])}, {_c(pad[1])}, "
                 f"{_c(dilation[0])}, {_c(dilation[1])}, {_c(groups)}, (float *){out.name}); }}")

    def _x_native_batch_norm(self, call, outs):
        x = _operand(call.args[0], self.name)
        weight, bias, mean, var = (self._opt(a) for a in call.args[1:5])
        training, _momentum, eps = call.args[5:8]
        if training or mean is None or var is None or len(x.shape) < 2:
            raise _unsupported("native_batch_norm in training mode")
        self._f32(x, weight, bias, mean, var)
        rest = product(x.shape[2:])
        if tuple(x.strides[2:]) != tuple(contiguous_strides(x.shape[2:])):
            raise _unsupported("native_batch_norm on a strided input")
        out = outs[0]
        self.lines.append(
            f"    ember_batch_norm_eval_f32({_c(x.shape[0])}, {_c(x.shape[1])}, {_c(rest)}, {x.ptr}, "
            f"{_c(x.strides[0])}, {_c(x.strides[1])}, {mean.ptr}, {_c(mean.strides[0])}, {var.ptr}, "
            f"{_c(var.strides[0])}, {weight.ptr if weight else 'NULL'}, {_c(weight.strides[0]) if weight else 0}, "
            f"{bias.ptr if bias else 'NULL'}, {_c(bias.strides[0]) if bias else 0}, {float(eps)}f, "
            f"(float *){out.name});")
        for extra in outs[1:]:  # the saved statistics: empty in eval mode, zero-filled if not
            if isinstance(extra, Buffer):
                self.lines.append(f"    memset({extra.name}, 0, (size_t){_c(product(extra.shape) * 4)});")

    def _pool_input(self, x):
        if len(x.shape) != 4 or tuple(x.strides) != tuple(contiguous_strides(x.shape)):
            raise _unsupported("pooling other than a contiguous 4-d input")
        self._f32(x)

    def _x_max_pool2d_with_indices(self, call, outs):
        x = _operand(call.args[0], self.name)
        self._pool_input(x)
        kernel, stride, padding, dilation = (list(a) for a in call.args[1:5])
        stride = stride or kernel
        kernel, stride, padding, dilation = ([v[0], v[-1]] for v in (kernel, stride, padding, dilation))
        out, idx = outs[0], outs[1] if len(outs) > 1 and isinstance(outs[1], Buffer) else None
        self.lines.append(
            f"    ember_max_pool2d_f32({_c(x.shape[0] * x.shape[1])}, {_c(x.shape[2])}, {_c(x.shape[3])}, {x.ptr}, "
            f"{_c(out.shape[2])}, {_c(out.shape[3])}, {_c(kernel[0])}, {_c(kernel[1])}, {_c(stride[0])}, "
            f"{_c(stride[1])}, {_c(padding[0])}, {_c(padding[1])}, {_c(dilation[0])}, {_c(dilation[1])}, "
            f"(float *){out.name}, {'(int64_t *)' + idx.name if idx is not None else 'NULL'});")

    def _x__adaptive_avg_pool2d(self, call, out):
        x = _operand(call.args[0], self.name)
        self._pool_input(x)
        self.lines.append(
            f"    ember_adaptive_avg_pool2d_f32({_c(x.shape[0] * x.shape[1])}, {_c(x.shape[2])}, {_c(x.shape[3])}, "
            f"{x.ptr}, {_c(out.shape[2])}, {_c(out.shape[3])}, (float *){out.name});")


def _unsupported(message: str):
    from ._aoti_c import CUnsupported

    return CUnsupported(message)


def _operand(obj, names):
    from ._aoti_c import _Operand

    return _Operand(obj, names)


def _c(expr) -> str:
    from ._aoti_c import _c as c_text

    return c_text(expr)
