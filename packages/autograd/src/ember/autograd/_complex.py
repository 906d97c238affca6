"""Which formula records an op call that involves complex tensors (PyTorch's convention).

PyTorch's gradient of a real loss L with respect to a complex z is conj(dL/dz*)... written
so that the gradient step ``z - lr * z.grad`` descends; for an op holomorphic in z with
derivative f'(z), the chain rule becomes ``grad_z = grad_out * conj(f'(z))``.

The real formulas compute ``grad_out * f'(z)``. For holomorphic (and all linear) ops the
complex rule is therefore the real formula sandwiched between two conjugations:
``conj(formula(conj(grad_out)))``; no formula needs a complex twin. Ops that are not
holomorphic (abs, angle, real/imag views, the FFT primitives, ...) have formulas written in
PyTorch's convention already, or an override here. Any other op raises when it would record a
complex call, instead of returning a silently wrong gradient.

A real input of a call whose gradient comes out complex (``x_real * z``) takes the real part
(the engine's fix_grad), as PyTorch's handle_r_to_c does.
"""

from __future__ import annotations

import ember
from ember._src.tensor import Tensor

from .formulas._registry import Formula

# Ops whose (real) formula is right for complex values through the conjugation sandwich: the
# holomorphic ones and every op linear with real coefficients (views, reductions, indexing).
HOLOMORPHIC = frozenset("""
add add_scaled sub neg mul div addcmul addcdiv lerp reciprocal square sqrt rsqrt pow exp exp2 expm1 log log2 log10
log1p sin cos tan sinh cosh tanh asin acos atan asinh acosh atanh sigmoid
sum mean prod cumsum cumprod dot mm bmm mv addmm addmv addbmm baddbmm
alias as_strided clone view expand permute transpose squeeze unsqueeze select slice narrow diagonal flip unfold
cat gather index index_select index_add_ index_copy_ index_put_ scatter_ scatter_add_ masked_fill_ where
constant_pad_nd copy_ fill_ _to_copy
""".split())

# Ops whose registered formula already follows PyTorch's complex convention: the complex ones,
# and real-valued reductions written as grad * (x - mean), grad * x / norm, grad * sgn(x).
AWARE = frozenset("view_as_real view_as_complex conj_physical angle sgn complex polar "
                  "_fft_c2c _fft_r2c _fft_c2r var std var_mean std_mean norm linalg_eig".split())


def _abs_backward(grads, inputs, outputs):
    # |z| is not holomorphic: d|z|/dz* = z / (2|z|), so grad = grad_out * sgn(z) (0 at z = 0).
    x = inputs.args[0]
    g = grads[0]
    if not x.dtype.is_complex:
        return (g * ember.sign(x),)
    return (g * ember.sgn(x),)


_OVERRIDES = {"abs": _abs_backward}
_CACHE: dict[tuple, Formula] = {}


def _sandwich(backward):
    def complex_backward(grads, inputs, outputs):
        conj = ember.conj_physical
        flipped = tuple(conj(g) if isinstance(g, Tensor) and g.dtype.is_complex else g for g in grads)
        result = backward(flipped, inputs, outputs)
        return tuple(_conj_all(r) for r in result)

    return complex_backward


def _conj_all(r):
    if isinstance(r, Tensor):
        return ember.conj_physical(r) if r.dtype.is_complex else r
    if type(r) in (list, tuple):
        return [_conj_all(x) for x in r]
    return r


def complex_formula(name: str, formula):
    """The formula that records op ``name`` (through ``formula``, its own or its out-of-place
    twin's) when a complex tensor is among its inputs or outputs."""
    if formula is not None:
        name = formula.op_name
    if name in AWARE:
        return formula
    key = (name, None if formula is None else id(formula.backward))
    known = _CACHE.get(key)
    if known is not None:
        return known
    if name in _OVERRIDES:
        made = Formula(name, _OVERRIDES[name])
    elif formula is not None and name in HOLOMORPHIC:
        made = Formula(name, _sandwich(formula.backward), formula.save_output, clone_self=formula.clone_self,
                       nondiff_outputs=formula.nondiff_outputs)
    else:
        raise RuntimeError(f"ember: the derivative of {name} for complex tensors is not implemented; compute it "
                           "under ember.no_grad() or on real and imaginary parts (see docs/deviations.md)")
    _CACHE[key] = made
    return made


def involves_complex(args, out) -> bool:
    for a in args:
        if isinstance(a, Tensor):
            if a.dtype.is_complex:
                return True
        elif type(a) in (list, tuple):
            if any(isinstance(b, Tensor) and b.dtype.is_complex for b in a):
                return True
    for o in (out,) if isinstance(out, Tensor) else out:
        if isinstance(o, Tensor) and o.dtype.is_complex:
            return True
    return False
