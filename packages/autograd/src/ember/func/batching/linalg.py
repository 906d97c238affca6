"""Batching rules for matrix products (mm, bmm, mv, dot and the add* forms) and the linear algebra
ops that already take leading batch dims (which run on the physical value).

Where only one operand is batched the batch folds into the rows of one larger product (one GEMM
for the whole batch, as a per-sample loop would run B small ones); both batched becomes a bmm.
"""

from __future__ import annotations

from ember._src.dispatch import OPS

from ._common import batch_size, bind, ensure_batched, signature, unwrap, wrap
from .views import all_batched_on_value_rule, on_value_rule

mm_op, bmm_op, mv_op = OPS["mm"], OPS["bmm"], OPS["mv"]


def _mm(a, ab, b, bb):
    """Physical ``a @ b`` for logical matrices; the result has the batch dim first."""
    if ab and bb:
        if a.shape[-1] == 1:
            # Outer products (per-sample weight gradients of vector inputs): a broadcast multiply
            # is the same sums (of one term) without B tiny GEMMs.
            return a * b
        return bmm_op(a, b)
    if ab:  # (B, n, k) @ (k, m): one (B*n, k) @ (k, m)
        size, n, k = a.shape
        return mm_op(a.reshape(size * n, k), b).reshape(size, n, b.shape[1])
    # (n, k) @ (B, k, m): (n, k) @ (k, B*m), then batch first
    size, k, m = b.shape
    out = mm_op(a, b.permute(1, 0, 2).reshape(k, size * m))
    return out.reshape(a.shape[0], size, m).permute(1, 0, 2)


def mm_rule(op, level, args, kwargs):
    a, ab = unwrap(args[0], level)
    b, bb = unwrap(args[1], level)
    return wrap(_mm(a, ab, b, bb), level)


def bmm_rule(op, level, args, kwargs):
    size = batch_size(level)
    a, ab = unwrap(args[0], level)
    b, bb = unwrap(args[1], level)
    if ab and not bb:  # (B, s, n, k) @ (s, k, m): fold B into the rows of each of the s products
        s, n, k = a.shape[1:]
        rows = a.permute(1, 0, 2, 3).reshape(s, size * n, k)
        return wrap(bmm_op(rows, b).reshape(s, size, n, b.shape[2]).permute(1, 0, 2, 3), level)
    a = ensure_batched(a, ab, size)
    b = ensure_batched(b, bb, size)
    s = a.shape[1]
    out = bmm_op(a.reshape(size * s, *a.shape[2:]), b.reshape(size * s, *b.shape[2:]))
    return wrap(out.reshape(size, s, *out.shape[1:]), level)


def mv_rule(op, level, args, kwargs):
    a, ab = unwrap(args[0], level)
    v, vb = unwrap(args[1], level)
    return wrap(_mm(a, ab, v.unsqueeze(-1), vb).squeeze(-1), level)


def dot_rule(op, level, args, kwargs):
    a, ab = unwrap(args[0], level)
    b, bb = unwrap(args[1], level)
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[-1]}] and src [{b.shape[-1]}] to "
                           "have the same number of elements, but got "
                           f"{a.shape[-1]} and {b.shape[-1]} elements respectively")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {a.dtype} and {b.dtype}")
    return wrap(_mm(a.unsqueeze(-2), ab, b.unsqueeze(-1), bb).reshape(-1), level)


def _scaled_sum(level, self_arg, product, product_batched, beta, alpha):
    """beta * self + alpha * product, with self broadcast to the product (PyTorch's add* forms)."""
    s, sb = unwrap(self_arg, level)
    n = product.dim() - (1 if product_batched else 0)
    if sb:
        for _ in range(n - (s.dim() - 1)):
            s = s.unsqueeze(1)
    out = product if alpha == 1 else product * alpha
    if beta == 0:  # as PyTorch: self is ignored (its NaNs do not propagate)
        return out
    return out + (s if beta == 1 else s * beta)


def _add_form(product_fn):
    def rule(op, level, args, kwargs):
        bound = bind(op, args, kwargs)
        names = signature(op.schema)[0]
        first, second = names[1], names[2]
        a, ab = unwrap(bound[first], level)
        b, bb = unwrap(bound[second], level)
        product, batched = product_fn(level, a, ab, b, bb)
        s_batched = unwrap(bound[names[0]], level)[1]
        beta = bound.get("beta", 1)
        out = _scaled_sum(level, bound[names[0]], product, batched, beta, bound.get("alpha", 1))
        out_batched = batched or (s_batched and beta != 0)
        return wrap(ensure_batched(out, out_batched, batch_size(level)), level)

    return rule


def _addmm_product(level, a, ab, b, bb):
    if not (ab or bb):
        return mm_op(a, b), False
    return _mm(a, ab, b, bb), True


def _addmv_product(level, a, ab, v, vb):
    if not (ab or vb):
        return mv_op(a, v), False
    return _mm(a, ab, v.unsqueeze(-1), vb).squeeze(-1), True


def _bmm_product(level, a, ab, b, bb):
    if not (ab or bb):
        return bmm_op(a, b), False
    return bmm_rule(None, level, (wrap(a, level) if ab else a, wrap(b, level) if bb else b), {})._value, True


def _addbmm_product(level, a, ab, b, bb):
    product, batched = _bmm_product(level, a, ab, b, bb)
    return product.sum(1 if batched else 0), batched


RULES = {
    "mm": mm_rule,
    "bmm": bmm_rule,
    "mv": mv_rule,
    "dot": dot_rule,
    "addmm": _add_form(_addmm_product),
    "addmv": _add_form(_addmv_product),
    "baddbmm": _add_form(_bmm_product),
    "addbmm": _add_form(_addbmm_product),
    "linalg_det": on_value_rule,
    "linalg_slogdet": on_value_rule,
    "linalg_inv_ex": on_value_rule,
    "linalg_cholesky_ex": on_value_rule,
    "linalg_qr": on_value_rule,
    "linalg_svd": on_value_rule,
    "linalg_eigh": on_value_rule,
    "linalg_lu_factor_ex": on_value_rule,
    "linalg_solve_ex": all_batched_on_value_rule,
    "linalg_eig": on_value_rule,
    "linalg_ldl_factor_ex": on_value_rule,
    "linalg_ldl_solve": all_batched_on_value_rule,
    "geqrf": on_value_rule,
}
