"""Flash attention (forward and backward) as Triton source, launched by ``_ops_attention``.

The forward streams key/value tiles past one tile of query rows, keeping the running row
maximum and sum (the online softmax) in registers, so the L x S score matrix never reaches
device memory; it writes the output and each row's log-sum-exp (natural log, float32). The
backward recomputes the probabilities tile by tile from that log-sum-exp: one kernel per
key tile accumulates dK and dV over the query tiles, another per query tile accumulates dQ
(two kernels instead of atomics: deterministic, and no float32 dQ buffer to convert).

Every kernel takes (batch, head, row) strides with a unit last stride, an optional additive
bias (any strides, 0 for broadcast dims; bool masks arrive as 0/-inf), causal masking with
PyTorch's top-left alignment (query i sees keys j <= i), and grouped heads (``GROUP`` query
heads share one key/value head). Rows that see no key give zeros and a log-sum-exp of -inf,
as the CPU kernel's fully-masked rows do. Scores are kept in base 2 (scale * log2(e) folded
in) so each probability is one ``exp2``.
"""

from __future__ import annotations

SOURCE = '''
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def fwd(Q, K, V, B, O, LSE, scale,
        sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm, sbn, sob, soh, som,
        H, GROUP, L, S, NUM_M,
        D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
        PREC: tl.constexpr):
    pid = tl.program_id(0)
    # The heaviest causal tiles (the last rows) start first.
    start_m = NUM_M - 1 - pid % NUM_M
    bh = pid // NUM_M
    b = bh // H
    h = bh % H
    hk = h // GROUP
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_e = tl.arange(0, BLOCK_E)
    offs_n = tl.arange(0, BLOCK_N)
    row_ok = rows < L
    q = tl.load(Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh + rows[:, None].to(tl.int64) * sqm
                + offs_d[None, :], mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
    k_base = K + b.to(tl.int64) * skb + hk.to(tl.int64) * skh
    v_base = V + b.to(tl.int64) * svb + hk.to(tl.int64) * svh
    b_base = B + b.to(tl.int64) * sbb + h.to(tl.int64) * sbh
    qk_scale = scale * LOG2E
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_E], tl.float32)
    hi = S
    if CAUSAL:
        hi = (start_m + 1) * BLOCK_M
        if hi > S:
            hi = S
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < S
        kt = tl.load(k_base + cols[None, :].to(tl.int64) * skn + offs_d[:, None],
                     mask=col_ok[None, :] & (offs_d[:, None] < D), other=0.0)
        s = tl.dot(q, kt, input_precision=PREC) * qk_scale
        if HAS_BIAS:
            bias = tl.load(b_base + rows[:, None].to(tl.int64) * sbm + cols[None, :].to(tl.int64) * sbn,
                           mask=row_ok[:, None] & col_ok[None, :], other=0.0)
            s += bias.to(tl.float32) * LOG2E
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (rows[:, None] >= cols[None, :])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_use[:, None])
        alpha = tl.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_base + cols[:, None].to(tl.int64) * svn + offs_e[None, :],
                    mask=col_ok[:, None] & (offs_e[None, :] < E), other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PREC)
        m_i = m_new
    empty = l_i == 0.0
    l_use = tl.where(empty, 1.0, l_i)
    out = acc / l_use[:, None]
    tl.store(O + b.to(tl.int64) * sob + h.to(tl.int64) * soh + rows[:, None].to(tl.int64) * som + offs_e[None, :],
             out.to(O.dtype.element_ty), mask=row_ok[:, None] & (offs_e[None, :] < E))
    lse = tl.where(empty, float("-inf"), (m_i + tl.log2(l_use)) * LN2)
    tl.store(LSE + bh.to(tl.int64) * L + rows, lse, mask=row_ok)


@triton.jit
def delta(O, DO, DELTA, sob, soh, som, sdb, sdh, sdm, H, L, E: tl.constexpr, BLOCK_M: tl.constexpr,
          BLOCK_E: tl.constexpr):
    # delta[row] = sum(dO * O) over the value width: the softmax backward's row term.
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_e = tl.arange(0, BLOCK_E)
    m = (rows[:, None] < L) & (offs_e[None, :] < E)
    o = tl.load(O + b.to(tl.int64) * sob + h.to(tl.int64) * soh + rows[:, None].to(tl.int64) * som
                + offs_e[None, :], mask=m, other=0.0).to(tl.float32)
    do = tl.load(DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh + rows[:, None].to(tl.int64) * sdm
                 + offs_e[None, :], mask=m, other=0.0).to(tl.float32)
    tl.store(DELTA + bh.to(tl.int64) * L + rows, tl.sum(o * do, 1), mask=rows < L)


@triton.jit
def _probs(q, kt, lse2, rows, cols, row_ok, col_ok, b_base, sbm, sbn, qk_scale,
           CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr, PREC: tl.constexpr):
    # The forward's probabilities for one (query tile, key tile), from the saved log-sum-exp.
    s = tl.dot(q, kt, input_precision=PREC) * qk_scale
    if HAS_BIAS:
        bias = tl.load(b_base + rows[:, None].to(tl.int64) * sbm + cols[None, :].to(tl.int64) * sbn,
                       mask=row_ok[:, None] & col_ok[None, :], other=0.0)
        s += bias.to(tl.float32) * LOG2E
    keep = col_ok[None, :] & row_ok[:, None]
    if CAUSAL:
        keep = keep & (rows[:, None] >= cols[None, :])
    return tl.where(keep, tl.exp2(s - lse2[:, None]), 0.0)


@triton.jit
def dkdv(Q, K, V, B, DO, LSE, DELTA, DK, DV, scale,
         sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm, sbn, sdb, sdh, sdm,
         skb2, skh2, skn2, svb2, svh2, svn2,
         H, GROUP, L, S, NUM_N,
         D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
         BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
         PREC: tl.constexpr):
    # One key tile of one query head: dV = P^T dO, dK = scale * dS^T Q over every query tile.
    pid = tl.program_id(0)
    start_n = pid % NUM_N
    bh = pid // NUM_N
    b = bh // H
    h = bh % H
    hk = h // GROUP
    cols = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < S
    offs_d = tl.arange(0, BLOCK_D)
    offs_e = tl.arange(0, BLOCK_E)
    offs_m = tl.arange(0, BLOCK_M)
    kt = tl.load(K + b.to(tl.int64) * skb + hk.to(tl.int64) * skh + cols[None, :].to(tl.int64) * skn
                 + offs_d[:, None], mask=col_ok[None, :] & (offs_d[:, None] < D), other=0.0)
    vt = tl.load(V + b.to(tl.int64) * svb + hk.to(tl.int64) * svh + cols[None, :].to(tl.int64) * svn
                 + offs_e[:, None], mask=col_ok[None, :] & (offs_e[:, None] < E), other=0.0)
    q_base = Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
    do_base = DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh
    b_base = B + b.to(tl.int64) * sbb + h.to(tl.int64) * sbh
    qk_scale = scale * LOG2E
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_E], tl.float32)
    lo = 0
    if CAUSAL:
        lo = (start_n * BLOCK_N // BLOCK_M) * BLOCK_M
    for start_m in range(lo, L, BLOCK_M):
        rows = start_m + offs_m
        row_ok = rows < L
        q = tl.load(q_base + rows[:, None].to(tl.int64) * sqm + offs_d[None, :],
                    mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
        do = tl.load(do_base + rows[:, None].to(tl.int64) * sdm + offs_e[None, :],
                     mask=row_ok[:, None] & (offs_e[None, :] < E), other=0.0)
        lse = tl.load(LSE + bh.to(tl.int64) * L + rows, mask=row_ok, other=float("inf"))
        lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
        dl = tl.load(DELTA + bh.to(tl.int64) * L + rows, mask=row_ok, other=0.0)
        p = _probs(q, kt, lse2, rows, cols, row_ok, col_ok, b_base, sbm, sbn, qk_scale, CAUSAL, HAS_BIAS, PREC)
        dv = tl.dot(tl.trans(p.to(do.dtype)), do, dv, input_precision=PREC)
        dp = tl.dot(do, vt, input_precision=PREC)
        ds = p * (dp - dl[:, None])
        dk = tl.dot(tl.trans(ds.to(q.dtype)), q, dk, input_precision=PREC)
    dk = dk * scale
    tl.store(DK + b.to(tl.int64) * skb2 + h.to(tl.int64) * skh2 + cols[:, None].to(tl.int64) * skn2 + offs_d[None, :],
             dk.to(DK.dtype.element_ty), mask=col_ok[:, None] & (offs_d[None, :] < D))
    tl.store(DV + b.to(tl.int64) * svb2 + h.to(tl.int64) * svh2 + cols[:, None].to(tl.int64) * svn2 + offs_e[None, :],
             dv.to(DV.dtype.element_ty), mask=col_ok[:, None] & (offs_e[None, :] < E))


@triton.jit
def dq(Q, K, V, B, DO, LSE, DELTA, DQ, scale,
       sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm, sbn, sdb, sdh, sdm, sqb2, sqh2, sqm2,
       H, GROUP, L, S, NUM_M,
       D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
       BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
       PREC: tl.constexpr):
    # One query tile: dQ = scale * dS K over every key tile.
    pid = tl.program_id(0)
    start_m = NUM_M - 1 - pid % NUM_M
    bh = pid // NUM_M
    b = bh // H
    h = bh % H
    hk = h // GROUP
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < L
    offs_d = tl.arange(0, BLOCK_D)
    offs_e = tl.arange(0, BLOCK_E)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh + rows[:, None].to(tl.int64) * sqm
                + offs_d[None, :], mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
    do = tl.load(DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh + rows[:, None].to(tl.int64) * sdm
                 + offs_e[None, :], mask=row_ok[:, None] & (offs_e[None, :] < E), other=0.0)
    lse = tl.load(LSE + bh.to(tl.int64) * L + rows, mask=row_ok, other=float("inf"))
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
    dl = tl.load(DELTA + bh.to(tl.int64) * L + rows, mask=row_ok, other=0.0)
    k_base = K + b.to(tl.int64) * skb + hk.to(tl.int64) * skh
    v_base = V + b.to(tl.int64) * svb + hk.to(tl.int64) * svh
    b_base = B + b.to(tl.int64) * sbb + h.to(tl.int64) * sbh
    qk_scale = scale * LOG2E
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    hi = S
    if CAUSAL:
        hi = (start_m + 1) * BLOCK_M
        if hi > S:
            hi = S
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < S
        k = tl.load(k_base + cols[:, None].to(tl.int64) * skn + offs_d[None, :],
                    mask=col_ok[:, None] & (offs_d[None, :] < D), other=0.0)
        vt = tl.load(v_base + cols[None, :].to(tl.int64) * svn + offs_e[:, None],
                     mask=col_ok[None, :] & (offs_e[:, None] < E), other=0.0)
        p = _probs(q, tl.trans(k), lse2, rows, cols, row_ok, col_ok, b_base, sbm, sbn, qk_scale, CAUSAL, HAS_BIAS,
                   PREC)
        dp = tl.dot(do, vt, input_precision=PREC)
        ds = p * (dp - dl[:, None])
        acc = tl.dot(ds.to(k.dtype), k, acc, input_precision=PREC)
    acc = acc * scale
    tl.store(DQ + b.to(tl.int64) * sqb2 + h.to(tl.int64) * sqh2 + rows[:, None].to(tl.int64) * sqm2 + offs_d[None, :],
             acc.to(DQ.dtype.element_ty), mask=row_ok[:, None] & (offs_d[None, :] < D))
'''
