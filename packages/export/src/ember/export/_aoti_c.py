"""Generating the C entry points of an AOT library from a lowered, scheduled graph.

The library's ``ember_aoti_run`` is written out step by step from the schedule that compile's
Inductor produced: bind each symbolic size from the inputs' sizes (checking static sizes,
repeated symbols and the exported ranges), allocate each buffer with its (symbolic) byte size,
call each fused kernel (the inductor C++ backend's code, in the same translation unit) and
each extern op in C (``_aoti_runtime_c.EXTERNS``), then copy the user outputs into buffers
the caller owns. Weights live in ``weights.bin`` beside the library, at offsets fixed here.

``CUnsupported`` names what the C path cannot generate (an extern op without a C version, a
dtype, a strided input); the caller falls back to the Python plan interpreter.
"""

from __future__ import annotations

import sympy

import ember
from ember.compiler.inductor._cpp import index_text
from ember.compiler.inductor._graph import ExternCall, StridedView
from ember.compiler.inductor._ir import Buffer, TensorValue, contiguous_strides, product

from ._aoti_c_nn import NNExterns
from ._aoti_runtime_c import EXTERNS

C_TYPES = {ember.float32: ("float", 0), ember.float64: ("double", 1), ember.int64: ("int64_t", 2),
           ember.int32: ("int32_t", 3), ember.bool: ("uint8_t", 4)}
ALIGN = 64
WEIGHTS_MAGIC = b"EMBERW01"


class CUnsupported(Exception):
    """The graph needs something the C entry points do not generate (the message says what)."""


def _c(expr) -> str:
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    return f"((int64_t){_size_text(expr)})"


def _size_text(expr) -> str:
    """C text of a non-negative size expression: compile's index printer, plus the
    ``floor``/``ceiling`` of a quotient that symbolic meta kernels produce (conv/pool sizes)."""
    if isinstance(expr, (sympy.floor, sympy.ceiling)):
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        if not den.is_Integer or int(den) <= 0:
            raise CUnsupported(f"the size expression {expr}")
        d = int(den)
        if isinstance(expr, sympy.ceiling):
            return f"(({_size_text(sympy.expand(num))} + {d - 1}) / {d})"
        return f"({_size_text(sympy.expand(num))} / {d})"
    if expr.is_Add or expr.is_Mul:
        if expr.is_Mul and any(a.is_Rational and not a.is_Integer for a in expr.args):
            raise CUnsupported(f"the size expression {expr}")
        op = " + " if expr.is_Add else " * "
        return "(" + op.join(_size_text(a) for a in expr.args) + ")"
    if expr.is_Integer:
        return str(int(expr))
    try:
        return index_text(expr)
    except NotImplementedError:
        raise CUnsupported(f"the size expression {expr}") from None


def _ctype(dtype) -> str:
    if dtype not in C_TYPES:
        raise CUnsupported(f"dtype {dtype}")
    return C_TYPES[dtype][0]


class _Operand:
    """A tensor argument of an extern op: base pointer name, shape, strides, offset, dtype."""

    def __init__(self, obj, names):
        if isinstance(obj, TensorValue):
            obj = obj.buffer
        if isinstance(obj, StridedView):
            self.buf, self.shape, self.strides, self.offset = obj.buffer, obj.shape, obj.strides, obj.offset
        elif isinstance(obj, Buffer):
            self.buf, self.shape, self.strides, self.offset = obj, obj.shape, obj.strides, obj.offset
        else:
            raise CUnsupported(f"extern argument {type(obj).__name__}")
        self.dtype = self.buf.dtype
        self.ptr = f"(({_ctype(self.dtype)} *){names(self.buf)} + {_c(self.offset)})"


class CWriter(NNExterns):
    def __init__(self, graph, plan, signatures, n_lifted: int, user_outputs: list, ranges: dict):
        self.g, self.plan, self.signatures = graph, plan, signatures
        self.n_lifted, self.user_outputs, self.ranges = n_lifted, user_outputs, ranges
        self.lines: list[str] = []
        self.allocated: list[str] = []
        self.weights: list = []  # (buffer name, tensor, offset)
        self.weight_bytes = len(WEIGHTS_MAGIC) + 8

    def name(self, buf) -> str:
        target = getattr(buf, "target", buf) or buf
        return target.name

    def _weight(self, name, tensor) -> int:
        offset = -(-self.weight_bytes // ALIGN) * ALIGN
        self.weights.append((name, tensor.contiguous(), offset))
        self.weight_bytes = offset + tensor.numel() * tensor.dtype.itemsize
        return offset

    def generate(self, lifted_values: list) -> str:
        w = self.lines
        g = self.g
        user_inputs = [b for b in g.inputs[self.n_lifted:]]
        if any(b is None for b in user_inputs):
            raise CUnsupported("a non-tensor user input")
        w.append("int ember_aoti_run(EmberAotiRunner *runner, const void *const *inputs, "
                 "const int64_t *const *input_sizes, void **outputs, int64_t *const *output_sizes) {")
        w.append("    int status = -1;")
        for buf, value in zip(g.inputs[:self.n_lifted], lifted_values):
            if buf is None:
                continue
            if tuple(buf.strides) != tuple(contiguous_strides(buf.shape)):
                raise CUnsupported(f"the weight {buf.name} is not contiguous")
            w.append(f"    char *{buf.name} = runner->weights + {self._weight(buf.name, value)};")
        for name, value in g.constants.items():
            w.append(f"    char *{name} = runner->weights + {self._weight(name, value.detach())};")
        self._bind_sizes(user_inputs)
        for entry in self.plan:
            if isinstance(entry, ExternCall):
                self._extern(entry)
            else:
                self._kernel(entry)
        self._outputs()
        w.append("    status = 0;")
        w.append("done:")
        for name in reversed(self.allocated):
            w.append(f"    free({name});")
        w.append("    return status;")
        w.append("}")
        return "\n".join(w) + "\n"

    # -- inputs and sizes --------------------------------------------------------------------
    def _bind_sizes(self, user_inputs):
        w = self.lines
        bound = {}
        for k, buf in enumerate(user_inputs):
            _ctype(buf.dtype)
            if tuple(buf.strides) != tuple(contiguous_strides(buf.shape)):
                raise CUnsupported(f"input {k} is not contiguous")
            w.append(f"    char *{buf.name} = (char *)inputs[{k}];")
            for d, size in enumerate(buf.shape):
                got = f"input_sizes[{k}][{d}]"
                if size.is_Integer:
                    self._check(f"{got} != {int(size)}", f"input {k}: size {d} must be {int(size)}")
                elif size.is_Symbol and size not in bound:
                    w.append(f"    int64_t {size.name} = {got};")
                    bound[size] = got
                    rng = self.ranges.get(size)
                    lo, hi = (rng.lower, rng.upper) if rng is not None else (0, None)
                    self._check(f"{size.name} < {lo}", f"input {k}: size {d} is below its range's minimum {lo}")
                    if hi is not None and hi < 2**62:
                        self._check(f"{size.name} > {hi}", f"input {k}: size {d} is above its range's maximum {hi}")
                else:
                    self._pending = getattr(self, "_pending", []) + [(got, size, k, d)]
        for got, size, k, d in getattr(self, "_pending", []):
            missing = [s for s in size.free_symbols if s not in bound]
            if missing:
                raise CUnsupported(f"the size {size} of input {k} has no symbol bound by a plain size")
            self._check(f"{got} != {_c(size)}", f"input {k}: size {d} must equal {size}")

    def _check(self, cond: str, message: str) -> None:
        self.lines.append(f'    if ({cond}) {{ ember_aoti_fail("{message}"); goto done; }}')

    # -- steps ---------------------------------------------------------------------------------
    def _alloc(self, buf) -> None:
        if buf.name in self.allocated:
            return
        nbytes = product(buf.shape) * buf.dtype.itemsize
        self.lines.insert(2, f"    char *{buf.name} = NULL;")
        self.lines.append(f"    {buf.name} = (char *)ember_aoti_alloc({_c(nbytes)});")
        self.allocated.append(buf.name)

    def _kernel(self, kernel):
        for node in kernel.nodes:
            buf = node.buf
            if buf.name in kernel.local or buf.target is not buf:
                continue
            _ctype(buf.dtype)
            self._alloc(buf)
        args = []
        for kind, what in self.signatures[kernel.name]:
            if kind == "ptr":
                args.append(f"(void *){what}")
            elif kind == "size":
                args.append(_c(what))
            else:
                args.append(_c(what))
        self.lines.append(f"    {kernel.name}({', '.join(args)});")

    def _extern(self, call: ExternCall):
        name = getattr(call.fn, "name", call.name)
        handler = getattr(self, f"_x_{name}", None)
        if handler is None:
            raise CUnsupported(f"the extern op {name}")
        outs = call.outputs
        for b in (outs if isinstance(outs, tuple) else (outs,)):
            if isinstance(b, Buffer):
                _ctype(b.dtype)
                self._alloc(b)
        handler(call, outs)

    def _ops(self, call, count):
        return [_Operand(a, self.name) for a in call.args[:count]]

    def _mm(self, a, b, out, bias=None, beta=1.0, alpha=1.0, batched=False):
        if any(t.dtype is not ember.float32 for t in (a, b)):
            raise CUnsupported("a matrix product of a dtype other than float32")
        if batched:
            nb, (sab, sai, sak), (sbb, sbk, sbj) = a.shape[0], a.strides, b.strides
            m, k, n = a.shape[1], a.shape[2], b.shape[2]
        else:
            nb, sab, sbb = 1, 0, 0
            (sai, sak), (sbk, sbj) = a.strides, b.strides
            m, k, n = a.shape[0], a.shape[1], b.shape[1]
        if bias is not None:
            if bias.dtype is not ember.float32:
                raise CUnsupported("a bias of a dtype other than float32")
            sci, scj = ((0, bias.strides[0]) if len(bias.shape) == 1 else
                        (bias.strides[0] if bias.shape[0] != 1 else 0, bias.strides[1] if bias.shape[1] != 1 else 0))
            if len(bias.shape) == 1 and bias.shape[0] == 1:
                scj = 0
            bias_args = f"{bias.ptr}, {_c(sci)}, {_c(scj)}"
        else:
            bias_args = "NULL, 0, 0"
        self.lines.append(
            f"    ember_bmm_f32({_c(nb)}, {_c(m)}, {_c(n)}, {_c(k)}, {a.ptr}, {_c(sab)}, {_c(sai)}, {_c(sak)}, "
            f"{b.ptr}, {_c(sbb)}, {_c(sbk)}, {_c(sbj)}, {bias_args}, {float(beta)}f, {float(alpha)}f, "
            f"(float *){out.name});")

    def _x_mm(self, call, out):
        a, b = self._ops(call, 2)
        self._mm(a, b, out)

    def _x_bmm(self, call, out):
        a, b = self._ops(call, 2)
        self._mm(a, b, out, batched=True)

    def _x_addmm(self, call, out):
        bias, a, b = self._ops(call, 3)
        extra = list(call.args[3:])
        beta = call.kwargs.get("beta", extra[0] if extra else 1)
        alpha = call.kwargs.get("alpha", extra[1] if len(extra) > 1 else 1)
        self._mm(a, b, out, bias=bias, beta=beta, alpha=alpha)

    def _x_embedding(self, call, out):
        weight, idx = self._ops(call, 2)
        if weight.dtype is not ember.float32 or idx.dtype is not ember.int64:
            raise CUnsupported("embedding of a dtype other than float32 with int64 indices")
        if tuple(idx.strides) != tuple(contiguous_strides(idx.shape)):
            raise CUnsupported("embedding with strided indices")
        w = self.lines
        w.append("    { int bad = 0;")
        w.append(f"      ember_embedding_f32({weight.ptr}, {_c(weight.strides[0])}, {_c(weight.strides[1])}, "
                 f"{_c(weight.shape[0])}, {_c(weight.shape[1])}, {idx.ptr}, {_c(product(idx.shape))}, "
                 f"(float *){out.name}, &bad);")
        w.append('      if (bad) { ember_aoti_fail("embedding: index out of range"); goto done; } }')

    def _x_scaled_dot_product_attention(self, call, out):
        q, k, v = self._ops(call, 3)
        args = list(call.args[3:])
        mask = call.kwargs.get("attn_mask", args[0] if args else None)
        dropout = call.kwargs.get("dropout_p", args[1] if len(args) > 1 else 0.0)
        causal = call.kwargs.get("is_causal", args[2] if len(args) > 2 else False)
        scale = call.kwargs.get("scale", args[3] if len(args) > 3 else None)
        if mask is not None or dropout or call.kwargs.get("enable_gqa"):
            raise CUnsupported("scaled_dot_product_attention with a mask, dropout or grouped heads")
        if len(q.shape) != 4 or any(t.dtype is not ember.float32 for t in (q, k, v)):
            raise CUnsupported("scaled_dot_product_attention on other than 4-d float32 tensors")
        scale_text = f"{float(scale)}f" if scale is not None else f"(1.0f / sqrtf((float){_c(q.shape[3])}))"
        w = self.lines
        w.append("    { int64_t sq[4] = {" + ", ".join(_c(s) for s in q.strides) + "}, sk[4] = {"
                 + ", ".join(_c(s) for s in k.strides) + "}, sv[4] = {" + ", ".join(_c(s) for s in v.strides) + "};")
        w.append(f"      ember_sdpa_f32({_c(q.shape[0])}, {_c(q.shape[1])}, {_c(q.shape[2])}, {_c(k.shape[2])}, "
                 f"{_c(q.shape[3])}, {_c(v.shape[3])}, {q.ptr}, sq, {k.ptr}, sk, {v.ptr}, sv, {int(bool(causal))}, "
                 f"{scale_text}, (float *){out.name}); }}")

    def _x_arange_affine(self, call, out):
        n, start, step = call.args[:3]
        ctype = _ctype(out.dtype)
        if not all(isinstance(x, (int, sympy.Basic)) for x in (start, step)):
            raise CUnsupported("arange with float bounds")
        self.lines.append(f"    for (int64_t i = 0; i < {_c(n)}; i++) (({ctype} *){out.name})[i] = "
                          f"({ctype})({_c(start)} + i * {_c(step)});")

    # -- outputs -------------------------------------------------------------------------------
    def _outputs(self):
        flat = []

        def walk(obj):
            if isinstance(obj, (list, tuple)):
                for o in obj:
                    walk(o)
            else:
                flat.append(obj)

        walk(self.g.output_template)
        self.out_meta = []
        for k, pos in enumerate(self.user_outputs):
            value = flat[pos]
            if not isinstance(value, TensorValue) or value.buffer is None:
                raise CUnsupported("a user output that is not a tensor")
            buf = value.buffer
            if tuple(value.shape) != tuple(buf.shape) or tuple(buf.strides) != tuple(contiguous_strides(buf.shape)):
                raise CUnsupported("a user output that is a view")
            nbytes = product(buf.shape) * buf.dtype.itemsize
            self.out_meta.append((len(buf.shape), C_TYPES[buf.dtype][1] if buf.dtype in C_TYPES else -1))
            _ctype(buf.dtype)
            for d, s in enumerate(buf.shape):
                self.lines.append(f"    output_sizes[{k}][{d}] = {_c(s)};")
            self.lines.append(f"    outputs[{k}] = ember_aoti_alloc({_c(nbytes)});")
            self.lines.append(f"    memcpy(outputs[{k}], {self.name(buf)}, (size_t){_c(nbytes)});")


def library_source(kernel_source: str, writer: CWriter, run_source: str, user_inputs: list) -> str:
    """The whole C file: kernels, externs, the runner and the introspection functions."""
    ins = [(len(b.shape), C_TYPES[b.dtype][1]) for b in user_inputs]
    outs = writer.out_meta
    parts = [kernel_source, EXTERNS, '#include "ember_aoti.h"\n',
             "struct EmberAotiRunner { char *weights; };\n",
             f"static const int in_ndim[] = {{{', '.join(str(n) for n, _ in ins) or '0'}}};",
             f"static const int in_dtype[] = {{{', '.join(str(t) for _, t in ins) or '0'}}};",
             f"static const int out_ndim[] = {{{', '.join(str(n) for n, _ in outs) or '0'}}};",
             f"static const int out_dtype[] = {{{', '.join(str(t) for _, t in outs) or '0'}}};",
             f"int ember_aoti_num_inputs(void) {{ return {len(ins)}; }}",
             f"int ember_aoti_num_outputs(void) {{ return {len(outs)}; }}",
             f"int ember_aoti_input_ndim(int i) {{ return i >= 0 && i < {len(ins)} ? in_ndim[i] : -1; }}",
             f"int ember_aoti_input_dtype(int i) {{ return i >= 0 && i < {len(ins)} ? in_dtype[i] : -1; }}",
             f"int ember_aoti_output_ndim(int i) {{ return i >= 0 && i < {len(outs)} ? out_ndim[i] : -1; }}",
             f"int ember_aoti_output_dtype(int i) {{ return i >= 0 && i < {len(outs)} ? out_dtype[i] : -1; }}",
             _CREATE.replace("WEIGHT_BYTES", str(writer.weight_bytes)).replace("MAGIC", WEIGHTS_MAGIC.decode()),
             run_source]
    return "\n".join(parts)


_CREATE = r"""
EmberAotiRunner *ember_aoti_create(const char *package_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/weights.bin", package_dir);
    FILE *f = fopen(path, "rb");
    if (!f) { ember_aoti_fail("cannot open weights.bin in the package directory"); return NULL; }
    EmberAotiRunner *r = (EmberAotiRunner *)calloc(1, sizeof *r);
    r->weights = (char *)ember_aoti_alloc(WEIGHT_BYTES);
    size_t got = fread(r->weights, 1, WEIGHT_BYTES, f);
    int extra = fgetc(f);
    fclose(f);
    if (got != (size_t)WEIGHT_BYTES || extra != EOF || memcmp(r->weights, "MAGIC", 8) != 0) {
        ember_aoti_fail("weights.bin does not belong to this library (size or magic differs)");
        free(r->weights);
        free(r);
        return NULL;
    }
    return r;
}

void ember_aoti_destroy(EmberAotiRunner *runner) {
    if (runner) { free(runner->weights); free(runner); }
}
"""


def weights_blob(writer: CWriter) -> bytes:
    """``weights.bin``: the magic, the total size, then each weight at its aligned offset."""
    out = bytearray(writer.weight_bytes)
    out[:8] = WEIGHTS_MAGIC
    out[8:16] = int(writer.weight_bytes).to_bytes(8, "little")
    for _, tensor, offset in writer.weights:
        data = tensor.detach().contiguous().numpy().tobytes() if tensor.numel() else b""
        out[offset:offset + len(data)] = data
    return bytes(out)
