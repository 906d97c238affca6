"""Flash attention (forward and backward) as Triton source, launched by ``_ops_attention``.

The forward streams key/value tiles past one tile of query rows, keeping the running row
maximum and sum (the online softmax) in registers, so the L x S score matrix never reaches
device memory; it writes the output and each row's log-sum-exp (natural log, float32). The
backward recomputes the probabilities tile by tile from that log-sum-exp: one kernel per
query tile accumulates dQ (and, launched first, computes and stores its rows' delta =
sum(dO * O), which the other kernel reads), another per key tile accumulates dK and dV over
the query tiles (two kernels instead of atomics: deterministic, and no float32 dQ buffer to
convert). dK/dV works transposed (keys along the rows: P^T = exp2(K Q^T - lse)), so each
product's left operand comes out of the previous one in registers and no tile is transposed
through shared memory. ``delta`` (a separate delta pass), ``bwd`` (one launch whose program
j does key tile j's dK/dV and query tile j's dQ, which evens out the causal work) and the atomic
form (``delta`` also zeroing a float32 dQ accumulator, ``dkdv`` with ``ATOMIC_DQ`` adding each
tile pair's dS K into it: 5 matrix products per tile pair instead of 7, then ``dq_cast``) are the
alternatives ``_ops_attention._BWD_MODE`` names; they measured slower on the H200. ``fwd_tma``, ``dq_tma``
and ``dkdv_tma`` are the forward, dQ and dK/dV kernels (no bias) with their tiles moved by the copy engine
through tensor descriptors made on the device (Triton's global scratch), optionally warp-specialized by Triton
(``WS``); ``_ops_attention`` takes them only where its ``_FWD_TMA``/``_DQ_TMA``/``_DKDV_TMA`` switches say.

Every kernel takes (batch, head, row) strides with a unit last stride and head widths that
are powers of two (the host pads odd widths with zeros), an optional additive bias (any
strides, 0 for broadcast dims; bool masks arrive as 0/-inf), causal masking with PyTorch's
top-left alignment (query i sees keys j <= i), and grouped heads (``GROUP`` query heads share
one key/value head). Tiles wholly left of (or, for dK/dV, below) the causal diagonal skip
the causal test, and lengths that are multiples of the tile skip the bounds masks
(``EVEN_M``/``EVEN_N``); tiles advance by pointer increments. Rows that see no key give zeros
and a log-sum-exp of -inf, as the CPU kernel's fully-masked rows do. Scores are kept in base
2 (scale * log2(e) folded in) so each probability is one ``exp2``; with a positive scale and no
bias the forward keeps the scores unscaled and folds the scale into that exponent's multiply-add.
"""

from __future__ import annotations

SOURCE = '''
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _load_tile(ptrs, a_ok, b_ok, MASK_A: tl.constexpr, MASK_B: tl.constexpr):
    # A 2-d tile (a bias), masked along axis 0 (a_ok) and/or axis 1 (b_ok) only where the tile may pass the
    # tensor's end: an unmasked load is vectorized along the unit-stride axis, a masked one element by element.
    if MASK_A:
        if MASK_B:
            x = tl.load(ptrs, mask=a_ok[:, None] & b_ok[None, :], other=0.0)
        else:
            x = tl.load(ptrs, mask=a_ok[:, None], other=0.0)
    elif MASK_B:
        x = tl.load(ptrs, mask=b_ok[None, :], other=0.0)
    else:
        x = tl.load(ptrs)
    return x


@triton.jit
def _load_bias(ptrs, rows_ok, cols_ok, MASK_ROWS: tl.constexpr, MASK_COLS: tl.constexpr, HAS_BIAS: tl.constexpr,
               KEYS_FIRST: tl.constexpr):
    # A bias tile of query rows x keys (KEYS_FIRST: keys x query rows, the dK/dV kernel's layout). HAS_BIAS 2: one
    # row of keys broadcast over the query rows (a key-padding mask): ``ptrs`` is a vector over the keys, loaded
    # once per tile instead of a tile of pointers (registers) and loads.
    if HAS_BIAS == 2:
        if MASK_COLS:
            x = tl.load(ptrs, mask=cols_ok, other=0.0)
        else:
            x = tl.load(ptrs)
        if KEYS_FIRST:
            x = x[:, None]
        else:
            x = x[None, :]
    elif KEYS_FIRST:
        x = _load_tile(ptrs, cols_ok, rows_ok, MASK_COLS, MASK_ROWS)
    else:
        x = _load_tile(ptrs, rows_ok, cols_ok, MASK_ROWS, MASK_COLS)
    return x


@triton.jit
def _fwd_tiles(acc, l_i, m_i, q, k_ptrs, v_ptrs, b_ptrs, rows, offs_n, lo, hi, S, skn, svn, sbn, qk_scale,
               BLOCK_N: tl.constexpr, MASK_COLS: tl.constexpr, CAUSAL_TILE: tl.constexpr, HAS_BIAS: tl.constexpr,
               PREC: tl.constexpr, FOLD_SCALE: tl.constexpr, L, MASK_ROWS: tl.constexpr):
    # Key tiles lo..hi (multiples of BLOCK_N) into the running max / sum / accumulator. MASK_ROWS: the query tile
    # may pass row L (only its bias rows are read here).
    k_ptrs += lo * skn
    v_ptrs += lo * svn
    if HAS_BIAS:
        b_ptrs += lo * sbn
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if MASK_COLS:
            k = tl.load(k_ptrs, mask=(cols < S)[:, None], other=0.0)
        else:
            k = tl.load(k_ptrs)
        s = tl.dot(q, tl.trans(k), input_precision=PREC)
        if not FOLD_SCALE:
            s = s * qk_scale
        if HAS_BIAS:
            bias = _load_bias(b_ptrs, rows < L, cols < S, MASK_ROWS, MASK_COLS, HAS_BIAS, False)
            s += bias.to(tl.float32) * LOG2E
        if MASK_COLS:
            s = tl.where((cols < S)[None, :], s, float("-inf"))
        if CAUSAL_TILE:
            s = tl.where(rows[:, None] >= cols[None, :], s, float("-inf"))
        if FOLD_SCALE:
            # A positive scale commutes with the row max: the scores stay unscaled and the scale goes into
            # the exponent's multiply-add (one instruction per score instead of two).
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp2(s * qk_scale - m_use[:, None])
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp2(s - m_use[:, None])
        alpha = tl.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASK_COLS:
            v = tl.load(v_ptrs, mask=(cols < S)[:, None], other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PREC)
        m_i = m_new
        k_ptrs += BLOCK_N * skn
        v_ptrs += BLOCK_N * svn
        if HAS_BIAS:
            b_ptrs += BLOCK_N * sbn
    return acc, l_i, m_i


@triton.jit
def fwd(Q, K, V, B, O, LSE, scale,
        sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm, sbn, sob, soh, som,
        H, GROUP, L, S, NUM_M,
        D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
        PREC: tl.constexpr, FOLD_SCALE: tl.constexpr, LPT: tl.constexpr):
    pid = tl.program_id(0)
    # The heaviest causal tiles (the last rows) start first: per head, or with LPT over all heads at once.
    if LPT:
        bhs = tl.num_programs(0) // NUM_M
        start_m = NUM_M - 1 - pid // bhs
        bh = pid % bhs
    else:
        start_m = NUM_M - 1 - pid % NUM_M
        bh = pid // NUM_M
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    hk = h // GROUP
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    offs_e = tl.arange(0, E)
    offs_n = tl.arange(0, BLOCK_N)
    q_ptrs = Q + b * sqb + h * sqh + rows[:, None].to(tl.int64) * sqm + offs_d[None, :]
    if EVEN_M:
        q = tl.load(q_ptrs)
    else:
        q = tl.load(q_ptrs, mask=(rows < L)[:, None], other=0.0)
    k_ptrs = K + b * skb + hk * skh + offs_n[:, None].to(tl.int64) * skn + offs_d[None, :]
    v_ptrs = V + b * svb + hk * svh + offs_n[:, None].to(tl.int64) * svn + offs_e[None, :]
    if HAS_BIAS == 2:  # one row over the keys (sbm == 0)
        b_ptrs = B + b * sbb + h * sbh + offs_n.to(tl.int64) * sbn
    else:
        b_ptrs = B + b * sbb + h * sbh + rows[:, None].to(tl.int64) * sbm + offs_n[None, :].to(tl.int64) * sbn
    qk_scale = scale * LOG2E
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, E], tl.float32)
    if CAUSAL:
        # Tiles left of the diagonal need no causal test; the diagonal ones do.
        diag = start_m * BLOCK_M
        if diag > S:
            diag = (S // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_ptrs, v_ptrs, b_ptrs, rows, offs_n, 0, diag, S, skn, svn,
                                   sbn, qk_scale, BLOCK_N, False, False, HAS_BIAS, PREC, FOLD_SCALE, L,
                                   not EVEN_M)
        hi = (start_m + 1) * BLOCK_M
        if hi > S:
            hi = S
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_ptrs, v_ptrs, b_ptrs, rows, offs_n, diag, hi, S, skn, svn,
                                   sbn, qk_scale, BLOCK_N, True, True, HAS_BIAS, PREC, FOLD_SCALE, L,
                                   not EVEN_M)
    else:
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_ptrs, v_ptrs, b_ptrs, rows, offs_n, 0, S, S, skn, svn,
                                   sbn, qk_scale, BLOCK_N, not EVEN_N, False, HAS_BIAS, PREC, FOLD_SCALE, L,
                                   not EVEN_M)
    empty = l_i == 0.0
    l_use = tl.where(empty, 1.0, l_i)
    out = acc / l_use[:, None]
    o_ptrs = O + b * sob + h * soh + rows[:, None].to(tl.int64) * som + offs_e[None, :]
    lse = tl.where(empty, float("-inf"), (m_i + tl.log2(l_use)) * LN2)
    if EVEN_M:
        tl.store(o_ptrs, out.to(O.dtype.element_ty))
        tl.store(LSE + bh.to(tl.int64) * L + rows, lse)
    else:
        tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=(rows < L)[:, None])
        tl.store(LSE + bh.to(tl.int64) * L + rows, lse, mask=rows < L)


@triton.jit
def _fwd_tiles_tma(acc, l_i, m_i, q, kd, vd, rows, offs_n, lo, hi, S, qk_scale, BLOCK_N: tl.constexpr,
                   MASK_COLS: tl.constexpr, CAUSAL_TILE: tl.constexpr, PREC: tl.constexpr, FOLD_SCALE: tl.constexpr,
                   WS: tl.constexpr):
    # _fwd_tiles with K and V tiles loaded through tensor descriptors (the copy engine; rows past S read as
    # zeros), no bias; with WS Triton splits the loop into a loading warp group and computing ones.
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        cols = start_n + offs_n
        k = kd.load([start_n, 0])
        s = tl.dot(q, tl.trans(k), input_precision=PREC)
        if not FOLD_SCALE:
            s = s * qk_scale
        if MASK_COLS:
            s = tl.where((cols < S)[None, :], s, float("-inf"))
        if CAUSAL_TILE:
            s = tl.where(rows[:, None] >= cols[None, :], s, float("-inf"))
        if FOLD_SCALE:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp2(s * qk_scale - m_use[:, None])
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp2(s - m_use[:, None])
        alpha = tl.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = vd.load([start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PREC)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def fwd_tma(Q, K, V, O, LSE, scale,
            sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som,
            H, GROUP, L, S, NUM_M,
            D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
            PREC: tl.constexpr, FOLD_SCALE: tl.constexpr, LPT: tl.constexpr, WS: tl.constexpr):
    # fwd without a bias, every tile of Q, K, V and O moved by the copy engine through a tensor descriptor
    # made per program over its (batch, head) slice (16-byte aligned bases and row strides: the host checks).
    pid = tl.program_id(0)
    if LPT:
        bhs = tl.num_programs(0) // NUM_M
        start_m = NUM_M - 1 - pid // bhs
        bh = pid % bhs
    else:
        start_m = NUM_M - 1 - pid % NUM_M
        bh = pid // NUM_M
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    hk = h // GROUP
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    qd = tl.make_tensor_descriptor(Q + b * sqb + h * sqh, shape=[L, D], strides=[sqm, 1], block_shape=[BLOCK_M, D])
    kd = tl.make_tensor_descriptor(K + b * skb + hk * skh, shape=[S, D], strides=[skn, 1], block_shape=[BLOCK_N, D])
    vd = tl.make_tensor_descriptor(V + b * svb + hk * svh, shape=[S, E], strides=[svn, 1], block_shape=[BLOCK_N, E])
    q = qd.load([start_m * BLOCK_M, 0])
    qk_scale = scale * LOG2E
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, E], tl.float32)
    if CAUSAL:
        hi = (start_m + 1) * BLOCK_M
        if hi > S:
            hi = S
        if WS:  # one loop (Triton warp-specializes a kernel's only loop), every tile given the causal test
            acc, l_i, m_i = _fwd_tiles_tma(acc, l_i, m_i, q, kd, vd, rows, offs_n, 0, hi, S, qk_scale, BLOCK_N, True,
                                           True, PREC, FOLD_SCALE, True)
        else:
            diag = start_m * BLOCK_M
            if diag > S:
                diag = (S // BLOCK_N) * BLOCK_N
            acc, l_i, m_i = _fwd_tiles_tma(acc, l_i, m_i, q, kd, vd, rows, offs_n, 0, diag, S, qk_scale, BLOCK_N,
                                           False, False, PREC, FOLD_SCALE, False)
            acc, l_i, m_i = _fwd_tiles_tma(acc, l_i, m_i, q, kd, vd, rows, offs_n, diag, hi, S, qk_scale, BLOCK_N,
                                           True, True, PREC, FOLD_SCALE, False)
    else:
        acc, l_i, m_i = _fwd_tiles_tma(acc, l_i, m_i, q, kd, vd, rows, offs_n, 0, S, S, qk_scale, BLOCK_N,
                                       not EVEN_N, False, PREC, FOLD_SCALE, WS)
    empty = l_i == 0.0
    l_use = tl.where(empty, 1.0, l_i)
    out = acc / l_use[:, None]
    lse = tl.where(empty, float("-inf"), (m_i + tl.log2(l_use)) * LN2)
    od = tl.make_tensor_descriptor(O + b * sob + h * soh, shape=[L, E], strides=[som, 1], block_shape=[BLOCK_M, E])
    od.store([start_m * BLOCK_M, 0], out.to(O.dtype.element_ty))
    if EVEN_M:
        tl.store(LSE + bh.to(tl.int64) * L + rows, lse)
    else:
        tl.store(LSE + bh.to(tl.int64) * L + rows, lse, mask=rows < L)


@triton.jit
def delta(O, DO, DELTA, DQA, sob, soh, som, sdb, sdh, sdm, H, L, E: tl.constexpr, BLOCK_M: tl.constexpr,
          D: tl.constexpr, ZERO_DQA: tl.constexpr):
    # delta[row] = sum(dO * O) over the value width: the softmax backward's row term. With ZERO_DQA the
    # same rows of the float32 dQ accumulator (B*H, L, D) are zeroed for the atomic dK/dV/dQ kernel.
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_e = tl.arange(0, E)
    m = (rows < L)[:, None]
    o = tl.load(O + b * sob + h * soh + rows[:, None].to(tl.int64) * som + offs_e[None, :], mask=m,
                other=0.0).to(tl.float32)
    do = tl.load(DO + b * sdb + h * sdh + rows[:, None].to(tl.int64) * sdm + offs_e[None, :], mask=m,
                 other=0.0).to(tl.float32)
    tl.store(DELTA + bh.to(tl.int64) * L + rows, tl.sum(o * do, 1), mask=rows < L)
    if ZERO_DQA:
        offs_d = tl.arange(0, D)
        tl.store(DQA + (bh.to(tl.int64) * L + rows[:, None]) * D + offs_d[None, :],
                 tl.zeros([BLOCK_M, D], tl.float32), mask=m)


@triton.jit
def dq_cast(DQA, DQ, scale, sqb2, sqh2, sqm2, H, L, D: tl.constexpr, BLOCK_M: tl.constexpr):
    # dQ = scale * the float32 accumulator, in dQ's dtype and layout.
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    m = (rows < L)[:, None]
    acc = tl.load(DQA + (bh.to(tl.int64) * L + rows[:, None]) * D + offs_d[None, :], mask=m, other=0.0)
    tl.store(DQ + b * sqb2 + h * sqh2 + rows[:, None].to(tl.int64) * sqm2 + offs_d[None, :],
             (acc * scale).to(DQ.dtype.element_ty), mask=m)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, qt_ptrs, do_ptrs, bt_ptrs, dqa_ptrs, lse_ptr, delta_ptr, cols, offs_m, lo, hi, L, S,
                sqm, sdm, sbm, qk_scale, BLOCK_M: tl.constexpr, MASK_ROWS: tl.constexpr, CAUSAL_TILE: tl.constexpr,
                HAS_BIAS: tl.constexpr, PREC: tl.constexpr, ATOMIC_DQ: tl.constexpr, MASK_COLS: tl.constexpr,
                D: tl.constexpr, DP_FIRST: tl.constexpr):
    # Query tiles lo..hi (multiples of BLOCK_M) into one key tile's dK and dV. Everything is computed
    # transposed (keys along the rows): P^T = exp2(K Q^T - lse) comes out of the product in the layout
    # that dV += P^T dO and dK += dS^T Q take as their left operand, so no tile is transposed in registers.
    # With ATOMIC_DQ the same dS^T also gives this key tile's share of dQ = dS K, added in float32 to
    # the query rows' accumulator (5 products per tile pair instead of the 7 of a separate dQ kernel).
    qt_ptrs += lo * sqm
    do_ptrs += lo * sdm
    if HAS_BIAS:
        bt_ptrs += lo * sbm
    if ATOMIC_DQ != 0:
        dqa_ptrs += lo * D
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + offs_m
        if MASK_ROWS:
            qt = tl.load(qt_ptrs, mask=(rows < L)[None, :], other=0.0)
            do = tl.load(do_ptrs, mask=(rows < L)[:, None], other=0.0)
            lse = tl.load(lse_ptr + rows, mask=rows < L, other=float("inf"))
            dl = tl.load(delta_ptr + rows, mask=rows < L, other=0.0)
        else:
            qt = tl.load(qt_ptrs)
            do = tl.load(do_ptrs)
            lse = tl.load(lse_ptr + rows)
            dl = tl.load(delta_ptr + rows)
        lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
        st = tl.dot(k, qt, input_precision=PREC)
        if DP_FIRST:
            dpt = tl.dot(v, tl.trans(do), input_precision=PREC)
        if HAS_BIAS:
            bias = _load_bias(bt_ptrs, rows < L, cols < S, MASK_ROWS, MASK_COLS, HAS_BIAS, True)
            pt = tl.exp2(st * qk_scale + bias.to(tl.float32) * LOG2E - lse2[None, :])
        else:
            pt = tl.exp2(st * qk_scale - lse2[None, :])
        if CAUSAL_TILE:
            pt = tl.where(rows[None, :] >= cols[:, None], pt, 0.0)
        if ATOMIC_DQ != 0 and MASK_COLS:  # keys past S (zero rows of K) must add nothing to dQ, not even inf * 0
            pt = tl.where((cols < S)[:, None], pt, 0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=PREC)
        if not DP_FIRST:
            dpt = tl.dot(v, tl.trans(do), input_precision=PREC)
        dst = (pt * (dpt - dl[None, :])).to(qt.dtype)
        dk = tl.dot(dst, tl.trans(qt), dk, input_precision=PREC)
        if ATOMIC_DQ == 1:
            dq = tl.dot(tl.trans(dst), k, input_precision=PREC)
            if MASK_ROWS:
                tl.atomic_add(dqa_ptrs, dq, mask=(rows < L)[:, None], sem="relaxed")
            else:
                tl.atomic_add(dqa_ptrs, dq, sem="relaxed")
            dqa_ptrs += BLOCK_M * D
        elif ATOMIC_DQ == 2:  # dQ^T = K^T dS^T: dS^T is the right operand as it stands
            dqt = tl.dot(tl.trans(k), dst, input_precision=PREC)
            if MASK_ROWS:
                tl.atomic_add(dqa_ptrs, dqt, mask=(rows < L)[None, :], sem="relaxed")
            else:
                tl.atomic_add(dqa_ptrs, dqt, sem="relaxed")
            dqa_ptrs += BLOCK_M * D
        qt_ptrs += BLOCK_M * sqm
        do_ptrs += BLOCK_M * sdm
        if HAS_BIAS:
            bt_ptrs += BLOCK_M * sbm
    return dk, dv


@triton.jit
def _dkdv_part(Q, K, V, B, DO, LSE, DELTA, DK, DV, DQA, scale,
               sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm, sbn, sdb, sdh, sdm,
               skb2, skh2, skn2, svb2, svh2, svn2, bh, start_n, H, GROUP, L, S,
               D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
               PREC: tl.constexpr, ATOMIC_DQ: tl.constexpr, DIAG_LAST: tl.constexpr, DP_FIRST: tl.constexpr):
    # One key tile of one query head: dV = P^T dO, dK = scale * dS^T Q over every query tile (and with
    # ATOMIC_DQ, dS K added into the float32 (B*H, L, D) accumulator DQA, unscaled).
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    hk = h // GROUP
    cols = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    offs_e = tl.arange(0, E)
    offs_m = tl.arange(0, BLOCK_M)
    k_ptrs = K + b * skb + hk * skh + cols[:, None].to(tl.int64) * skn + offs_d[None, :]
    v_ptrs = V + b * svb + hk * svh + cols[:, None].to(tl.int64) * svn + offs_e[None, :]
    if EVEN_N:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    else:
        k = tl.load(k_ptrs, mask=(cols < S)[:, None], other=0.0)
        v = tl.load(v_ptrs, mask=(cols < S)[:, None], other=0.0)
    qt_ptrs = Q + b * sqb + h * sqh + offs_m[None, :].to(tl.int64) * sqm + offs_d[:, None]
    do_ptrs = DO + b * sdb + h * sdh + offs_m[:, None].to(tl.int64) * sdm + offs_e[None, :]
    if HAS_BIAS == 2:  # one row over the keys (sbm == 0)
        bt_ptrs = B + b * sbb + h * sbh + cols.to(tl.int64) * sbn
    else:
        bt_ptrs = B + b * sbb + h * sbh + offs_m[None, :].to(tl.int64) * sbm + cols[:, None].to(tl.int64) * sbn
    lse_ptr = LSE + bh.to(tl.int64) * L
    delta_ptr = DELTA + bh.to(tl.int64) * L
    if ATOMIC_DQ == 2:
        dqa_ptrs = DQA + bh.to(tl.int64) * L * D + offs_m[None, :] * D + offs_d[:, None]
    else:
        dqa_ptrs = DQA + bh.to(tl.int64) * L * D + offs_m[:, None] * D + offs_d[None, :]
    qk_scale = scale * LOG2E
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, E], tl.float32)
    if CAUSAL:
        # Query tiles crossing the diagonal need the causal test; those below it see the whole key tile.
        lo = start_n * BLOCK_N
        mid = lo + BLOCK_N
        if mid > L:
            mid = L
        if not DIAG_LAST:
            dk, dv = _dkdv_tiles(dk, dv, k, v, qt_ptrs, do_ptrs, bt_ptrs, dqa_ptrs, lse_ptr, delta_ptr, cols, offs_m,
                                 lo, mid, L, S, sqm, sdm, sbm, qk_scale, BLOCK_M, True, True, HAS_BIAS, PREC,
                                 ATOMIC_DQ, not EVEN_N, D, DP_FIRST)
        dk, dv = _dkdv_tiles(dk, dv, k, v, qt_ptrs, do_ptrs, bt_ptrs, dqa_ptrs, lse_ptr, delta_ptr, cols, offs_m,
                             mid, L, L, S, sqm, sdm, sbm, qk_scale, BLOCK_M, not EVEN_M, False, HAS_BIAS, PREC,
                             ATOMIC_DQ, not EVEN_N, D, DP_FIRST)
        if DIAG_LAST:
            dk, dv = _dkdv_tiles(dk, dv, k, v, qt_ptrs, do_ptrs, bt_ptrs, dqa_ptrs, lse_ptr, delta_ptr, cols, offs_m,
                                 lo, mid, L, S, sqm, sdm, sbm, qk_scale, BLOCK_M, True, True, HAS_BIAS, PREC,
                                 ATOMIC_DQ, not EVEN_N, D, DP_FIRST)
    else:
        dk, dv = _dkdv_tiles(dk, dv, k, v, qt_ptrs, do_ptrs, bt_ptrs, dqa_ptrs, lse_ptr, delta_ptr, cols, offs_m, 0,
                             L, L, S, sqm, sdm, sbm, qk_scale, BLOCK_M, not EVEN_M, False, HAS_BIAS, PREC, ATOMIC_DQ,
                             not EVEN_N, D, DP_FIRST)
    dk = dk * scale
    dk_ptrs = DK + b * skb2 + h * skh2 + cols[:, None].to(tl.int64) * skn2 + offs_d[None, :]
    dv_ptrs = DV + b * svb2 + h * svh2 + cols[:, None].to(tl.int64) * svn2 + offs_e[None, :]
    if EVEN_N:
        tl.store(dk_ptrs, dk.to(DK.dtype.element_ty))
        tl.store(dv_ptrs, dv.to(DV.dtype.element_ty))
    else:
        tl.store(dk_ptrs, dk.to(DK.dtype.element_ty), mask=(cols < S)[:, None])
        tl.store(dv_ptrs, dv.to(DV.dtype.element_ty), mask=(cols < S)[:, None])


@triton.jit
def dkdv(Q, K, V, B, DO, LSE, DELTA, DK, DV, DQA, scale,
         sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm, sbn, sdb, sdh, sdm,
         skb2, skh2, skn2, svb2, svh2, svn2,
         H, GROUP, L, S, NUM_N,
         D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
         EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
         PREC: tl.constexpr, LPT: tl.constexpr, ATOMIC_DQ: tl.constexpr, DIAG_LAST: tl.constexpr,
         DP_FIRST: tl.constexpr):
    pid = tl.program_id(0)
    if LPT:  # the first key tiles (under the causal mask the most query tiles) of every head first
        bhs = tl.num_programs(0) // NUM_N
        bh, start_n = pid % bhs, pid // bhs
    else:
        bh, start_n = pid // NUM_N, pid % NUM_N
    _dkdv_part(Q, K, V, B, DO, LSE, DELTA, DK, DV, DQA, scale, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb,
               sbh, sbm, sbn, sdb, sdh, sdm, skb2, skh2, skn2, svb2, svh2, svn2, bh, start_n, H, GROUP, L,
               S, D, E, BLOCK_M, BLOCK_N, EVEN_M, EVEN_N, CAUSAL, HAS_BIAS, PREC, ATOMIC_DQ, DIAG_LAST, DP_FIRST)


@triton.jit
def _dkdv_tiles_tma(dk, dv, k, v, qd, dod, lse_ptr, delta_ptr, cols, offs_m, lo, hi, L, qk_scale,
                    BLOCK_M: tl.constexpr, MASK_ROWS: tl.constexpr, CAUSAL_TILE: tl.constexpr, PREC: tl.constexpr,
                    WS: tl.constexpr):
    # _dkdv_tiles with Q and dO tiles through tensor descriptors (rows past L read as zeros, and their
    # log-sum-exp as +inf, so they add nothing), no bias, no atomic dQ; with WS the loop warp-specialized.
    for start_m in tl.range(lo, hi, BLOCK_M, warp_specialize=WS):
        rows = start_m + offs_m
        q = qd.load([start_m, 0])
        do = dod.load([start_m, 0])
        if MASK_ROWS:
            lse = tl.load(lse_ptr + rows, mask=rows < L, other=float("inf"))
            dl = tl.load(delta_ptr + rows, mask=rows < L, other=0.0)
        else:
            lse = tl.load(lse_ptr + rows)
            dl = tl.load(delta_ptr + rows)
        lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
        qt = tl.trans(q)
        st = tl.dot(k, qt, input_precision=PREC)
        pt = tl.exp2(st * qk_scale - lse2[None, :])
        if CAUSAL_TILE:
            pt = tl.where(rows[None, :] >= cols[:, None], pt, 0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=PREC)
        dpt = tl.dot(v, tl.trans(do), input_precision=PREC)
        dst = (pt * (dpt - dl[None, :])).to(q.dtype)
        dk = tl.dot(dst, q, dk, input_precision=PREC)
    return dk, dv


@triton.jit
def dkdv_tma(Q, K, V, DO, LSE, DELTA, DK, DV, scale,
             sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sdb, sdh, sdm, skb2, skh2, skn2, svb2, svh2, svn2,
             H, GROUP, L, S, NUM_N,
             D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
             PREC: tl.constexpr, LPT: tl.constexpr, WS: tl.constexpr):
    # dkdv (dq_first's, diagonal tiles last) without a bias, its tiles moved through tensor descriptors made per
    # program over the (batch, head) slice; dK and dV are stored per query head (grouped heads summed by the host).
    # With WS the loop is warp-specialized (causal: one loop, every tile given the causal test).
    pid = tl.program_id(0)
    if LPT:
        bhs = tl.num_programs(0) // NUM_N
        bh, start_n = pid % bhs, pid // bhs
    else:
        bh, start_n = pid // NUM_N, pid % NUM_N
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    hk = h // GROUP
    col0 = start_n * BLOCK_N
    cols = col0 + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    k = tl.make_tensor_descriptor(K + b * skb + hk * skh, shape=[S, D], strides=[skn, 1],
                                  block_shape=[BLOCK_N, D]).load([col0, 0])
    v = tl.make_tensor_descriptor(V + b * svb + hk * svh, shape=[S, E], strides=[svn, 1],
                                  block_shape=[BLOCK_N, E]).load([col0, 0])
    qd = tl.make_tensor_descriptor(Q + b * sqb + h * sqh, shape=[L, D], strides=[sqm, 1], block_shape=[BLOCK_M, D])
    dod = tl.make_tensor_descriptor(DO + b * sdb + h * sdh, shape=[L, E], strides=[sdm, 1], block_shape=[BLOCK_M, E])
    lse_ptr = LSE + bh.to(tl.int64) * L
    delta_ptr = DELTA + bh.to(tl.int64) * L
    qk_scale = scale * LOG2E
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, E], tl.float32)
    if CAUSAL:
        if WS:
            dk, dv = _dkdv_tiles_tma(dk, dv, k, v, qd, dod, lse_ptr, delta_ptr, cols, offs_m, col0, L, L, qk_scale,
                                     BLOCK_M, True, True, PREC, True)
        else:
            mid = col0 + BLOCK_N
            if mid > L:
                mid = L
            dk, dv = _dkdv_tiles_tma(dk, dv, k, v, qd, dod, lse_ptr, delta_ptr, cols, offs_m, mid, L, L, qk_scale,
                                     BLOCK_M, not EVEN_M, False, PREC, False)
            dk, dv = _dkdv_tiles_tma(dk, dv, k, v, qd, dod, lse_ptr, delta_ptr, cols, offs_m, col0, mid, L,
                                     qk_scale, BLOCK_M, True, True, PREC, False)
    else:
        dk, dv = _dkdv_tiles_tma(dk, dv, k, v, qd, dod, lse_ptr, delta_ptr, cols, offs_m, 0, L, L, qk_scale,
                                 BLOCK_M, not EVEN_M, False, PREC, WS)
    dk = dk * scale
    tl.make_tensor_descriptor(DK + b * skb2 + h * skh2, shape=[S, D], strides=[skn2, 1],
                              block_shape=[BLOCK_N, D]).store([col0, 0], dk.to(DK.dtype.element_ty))
    tl.make_tensor_descriptor(DV + b * svb2 + h * svh2, shape=[S, E], strides=[svn2, 1],
                              block_shape=[BLOCK_N, E]).store([col0, 0], dv.to(DV.dtype.element_ty))


@triton.jit
def _dq_tiles(acc, q, do, lse2, dl, k_ptrs, v_ptrs, b_ptrs, rows, offs_n, lo, hi, L, S, skn, svn, sbn, qk_scale,
              BLOCK_N: tl.constexpr, MASK_COLS: tl.constexpr, CAUSAL_TILE: tl.constexpr, HAS_BIAS: tl.constexpr,
              PREC: tl.constexpr, DP_FIRST: tl.constexpr, MASK_ROWS: tl.constexpr):
    # Key tiles lo..hi (multiples of BLOCK_N) into one query tile's dQ (MASK_ROWS: the tile may pass row L).
    k_ptrs += lo * skn
    v_ptrs += lo * svn
    if HAS_BIAS:
        b_ptrs += lo * sbn
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if MASK_COLS:
            k = tl.load(k_ptrs, mask=(cols < S)[:, None], other=0.0)
            v = tl.load(v_ptrs, mask=(cols < S)[:, None], other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        s = tl.dot(q, tl.trans(k), input_precision=PREC)
        if DP_FIRST:
            dp = tl.dot(do, tl.trans(v), input_precision=PREC)
        if HAS_BIAS:
            bias = _load_bias(b_ptrs, rows < L, cols < S, MASK_ROWS, MASK_COLS, HAS_BIAS, False)
            p = tl.exp2(s * qk_scale + bias.to(tl.float32) * LOG2E - lse2[:, None])
        else:
            p = tl.exp2(s * qk_scale - lse2[:, None])
        if MASK_COLS:
            p = tl.where((cols < S)[None, :], p, 0.0)
        if CAUSAL_TILE:
            p = tl.where(rows[:, None] >= cols[None, :], p, 0.0)
        if not DP_FIRST:
            dp = tl.dot(do, tl.trans(v), input_precision=PREC)
        ds = p * (dp - dl[:, None])
        acc = tl.dot(ds.to(k.dtype), k, acc, input_precision=PREC)
        k_ptrs += BLOCK_N * skn
        v_ptrs += BLOCK_N * svn
        if HAS_BIAS:
            b_ptrs += BLOCK_N * sbn
    return acc


@triton.jit
def _dq_part(Q, K, V, B, DO, O, LSE, DELTA, DQ, scale,
             sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm, sbn, sdb, sdh, sdm, sob, soh, som,
             sqb2, sqh2, sqm2, bh, start_m, H, GROUP, L, S,
             D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
             PREC: tl.constexpr, OWN_DELTA: tl.constexpr, DP_FIRST: tl.constexpr):
    # One query tile: dQ = scale * dS K over every key tile. With OWN_DELTA the tile's delta
    # (sum(dO * O) per row) is computed here from O and stored for the dK/dV kernel that follows.
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    hk = h // GROUP
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    offs_e = tl.arange(0, E)
    offs_n = tl.arange(0, BLOCK_N)
    q_ptrs = Q + b * sqb + h * sqh + rows[:, None].to(tl.int64) * sqm + offs_d[None, :]
    do_ptrs = DO + b * sdb + h * sdh + rows[:, None].to(tl.int64) * sdm + offs_e[None, :]
    o_ptrs = O + b * sob + h * soh + rows[:, None].to(tl.int64) * som + offs_e[None, :]
    row_ptr = bh.to(tl.int64) * L + rows
    if EVEN_M:
        q = tl.load(q_ptrs)
        do = tl.load(do_ptrs)
        lse = tl.load(LSE + row_ptr)
        if OWN_DELTA:
            dl = tl.sum(tl.load(o_ptrs).to(tl.float32) * do.to(tl.float32), 1)
            tl.store(DELTA + row_ptr, dl)
        else:
            dl = tl.load(DELTA + row_ptr)
    else:
        q = tl.load(q_ptrs, mask=(rows < L)[:, None], other=0.0)
        do = tl.load(do_ptrs, mask=(rows < L)[:, None], other=0.0)
        lse = tl.load(LSE + row_ptr, mask=rows < L, other=float("inf"))
        if OWN_DELTA:
            o = tl.load(o_ptrs, mask=(rows < L)[:, None], other=0.0)
            dl = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
            tl.store(DELTA + row_ptr, dl, mask=rows < L)
        else:
            dl = tl.load(DELTA + row_ptr, mask=rows < L, other=0.0)
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
    k_ptrs = K + b * skb + hk * skh + offs_n[:, None].to(tl.int64) * skn + offs_d[None, :]
    v_ptrs = V + b * svb + hk * svh + offs_n[:, None].to(tl.int64) * svn + offs_e[None, :]
    if HAS_BIAS == 2:  # one row over the keys (sbm == 0)
        b_ptrs = B + b * sbb + h * sbh + offs_n.to(tl.int64) * sbn
    else:
        b_ptrs = B + b * sbb + h * sbh + rows[:, None].to(tl.int64) * sbm + offs_n[None, :].to(tl.int64) * sbn
    qk_scale = scale * LOG2E
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if CAUSAL:
        diag = start_m * BLOCK_M
        if diag > S:
            diag = (S // BLOCK_N) * BLOCK_N
        acc = _dq_tiles(acc, q, do, lse2, dl, k_ptrs, v_ptrs, b_ptrs, rows, offs_n, 0, diag, L, S, skn, svn, sbn,
                        qk_scale, BLOCK_N, False, False, HAS_BIAS, PREC, DP_FIRST, not EVEN_M)
        hi = (start_m + 1) * BLOCK_M
        if hi > S:
            hi = S
        acc = _dq_tiles(acc, q, do, lse2, dl, k_ptrs, v_ptrs, b_ptrs, rows, offs_n, diag, hi, L, S, skn, svn, sbn,
                        qk_scale, BLOCK_N, True, True, HAS_BIAS, PREC, DP_FIRST, not EVEN_M)
    else:
        acc = _dq_tiles(acc, q, do, lse2, dl, k_ptrs, v_ptrs, b_ptrs, rows, offs_n, 0, S, L, S, skn, svn, sbn,
                        qk_scale, BLOCK_N, not EVEN_N, False, HAS_BIAS, PREC, DP_FIRST, not EVEN_M)
    acc = acc * scale
    dq_ptrs = DQ + b * sqb2 + h * sqh2 + rows[:, None].to(tl.int64) * sqm2 + offs_d[None, :]
    if EVEN_M:
        tl.store(dq_ptrs, acc.to(DQ.dtype.element_ty))
    else:
        tl.store(dq_ptrs, acc.to(DQ.dtype.element_ty), mask=(rows < L)[:, None])


@triton.jit
def dq(Q, K, V, B, DO, O, LSE, DELTA, DQ, scale,
       sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm, sbn, sdb, sdh, sdm, sob, soh, som,
       sqb2, sqh2, sqm2, H, GROUP, L, S, NUM_M,
       D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
       EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
       PREC: tl.constexpr, OWN_DELTA: tl.constexpr, LPT: tl.constexpr, DP_FIRST: tl.constexpr):
    pid = tl.program_id(0)
    if LPT:  # the last query tiles (the most keys under the causal mask) of every head first
        bhs = tl.num_programs(0) // NUM_M
        bh, start_m = pid % bhs, NUM_M - 1 - pid // bhs
    else:
        bh, start_m = pid // NUM_M, NUM_M - 1 - pid % NUM_M
    _dq_part(Q, K, V, B, DO, O, LSE, DELTA, DQ, scale, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm,
             sbn, sdb, sdh, sdm, sob, soh, som, sqb2, sqh2, sqm2, bh, start_m, H, GROUP,
             L, S, D, E, BLOCK_M, BLOCK_N, EVEN_M, EVEN_N, CAUSAL, HAS_BIAS, PREC, OWN_DELTA, DP_FIRST)


@triton.jit
def _dq_tiles_tma(acc, q, do, lse2, dl, kd, vd, rows, offs_n, lo, hi, S, qk_scale, BLOCK_N: tl.constexpr,
                  MASK_COLS: tl.constexpr, CAUSAL_TILE: tl.constexpr, PREC: tl.constexpr, WS: tl.constexpr):
    # _dq_tiles with K and V tiles through tensor descriptors (rows past S read as zeros), no bias.
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        cols = start_n + offs_n
        k = kd.load([start_n, 0])
        v = vd.load([start_n, 0])
        s = tl.dot(q, tl.trans(k), input_precision=PREC)
        p = tl.exp2(s * qk_scale - lse2[:, None])
        if MASK_COLS:
            p = tl.where((cols < S)[None, :], p, 0.0)
        if CAUSAL_TILE:
            p = tl.where(rows[:, None] >= cols[None, :], p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PREC)
        ds = p * (dp - dl[:, None])
        acc = tl.dot(ds.to(k.dtype), k, acc, input_precision=PREC)
    return acc


@triton.jit
def dq_tma(Q, K, V, DO, O, LSE, DELTA, DQ, scale,
           sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sdb, sdh, sdm, sob, soh, som, sqb2, sqh2, sqm2,
           H, GROUP, L, S, NUM_M,
           D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr,
           PREC: tl.constexpr, OWN_DELTA: tl.constexpr, LPT: tl.constexpr, WS: tl.constexpr):
    # dq without a bias, its tiles moved through tensor descriptors made per program over the (batch, head)
    # slice (as fwd_tma); with WS its loop warp-specialized (causal: one loop, every tile given the causal test).
    pid = tl.program_id(0)
    if LPT:
        bhs = tl.num_programs(0) // NUM_M
        bh, start_m = pid % bhs, NUM_M - 1 - pid // bhs
    else:
        bh, start_m = pid // NUM_M, NUM_M - 1 - pid % NUM_M
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    hk = h // GROUP
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    row0 = start_m * BLOCK_M
    q = tl.make_tensor_descriptor(Q + b * sqb + h * sqh, shape=[L, D], strides=[sqm, 1],
                                  block_shape=[BLOCK_M, D]).load([row0, 0])
    do = tl.make_tensor_descriptor(DO + b * sdb + h * sdh, shape=[L, E], strides=[sdm, 1],
                                   block_shape=[BLOCK_M, E]).load([row0, 0])
    kd = tl.make_tensor_descriptor(K + b * skb + hk * skh, shape=[S, D], strides=[skn, 1], block_shape=[BLOCK_N, D])
    vd = tl.make_tensor_descriptor(V + b * svb + hk * svh, shape=[S, E], strides=[svn, 1], block_shape=[BLOCK_N, E])
    row_ptr = bh.to(tl.int64) * L + rows
    if OWN_DELTA:
        o = tl.make_tensor_descriptor(O + b * sob + h * soh, shape=[L, E], strides=[som, 1],
                                      block_shape=[BLOCK_M, E]).load([row0, 0])
        dl = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    if EVEN_M:
        lse = tl.load(LSE + row_ptr)
        if OWN_DELTA:
            tl.store(DELTA + row_ptr, dl)
        else:
            dl = tl.load(DELTA + row_ptr)
    else:
        lse = tl.load(LSE + row_ptr, mask=rows < L, other=float("inf"))
        if OWN_DELTA:
            tl.store(DELTA + row_ptr, dl, mask=rows < L)
        else:
            dl = tl.load(DELTA + row_ptr, mask=rows < L, other=0.0)
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
    qk_scale = scale * LOG2E
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if CAUSAL:
        hi = (start_m + 1) * BLOCK_M
        if hi > S:
            hi = S
        if WS:
            acc = _dq_tiles_tma(acc, q, do, lse2, dl, kd, vd, rows, offs_n, 0, hi, S, qk_scale, BLOCK_N, True, True,
                                PREC, True)
        else:
            diag = start_m * BLOCK_M
            if diag > S:
                diag = (S // BLOCK_N) * BLOCK_N
            acc = _dq_tiles_tma(acc, q, do, lse2, dl, kd, vd, rows, offs_n, 0, diag, S, qk_scale, BLOCK_N, False,
                                False, PREC, False)
            acc = _dq_tiles_tma(acc, q, do, lse2, dl, kd, vd, rows, offs_n, diag, hi, S, qk_scale, BLOCK_N, True,
                                True, PREC, False)
    else:
        acc = _dq_tiles_tma(acc, q, do, lse2, dl, kd, vd, rows, offs_n, 0, S, S, qk_scale, BLOCK_N, not EVEN_N,
                            False, PREC, WS)
    acc = acc * scale
    tl.make_tensor_descriptor(DQ + b * sqb2 + h * sqh2, shape=[L, D], strides=[sqm2, 1],
                              block_shape=[BLOCK_M, D]).store([row0, 0], acc.to(DQ.dtype.element_ty))


@triton.jit
def bwd(Q, K, V, B, DO, O, LSE, DELTA, DQ, DK, DV, scale,
        sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh, sbm, sbn, sdb, sdh, sdm, sob, soh, som,
        sqb2, sqh2, sqm2, skb2, skh2, skn2, svb2, svh2, svn2,
        H, GROUP, L, S, NUM_N, NUM_M, NUM_J,
        D: tl.constexpr, E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M2: tl.constexpr,
        BLOCK_N2: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, EVEN_M2: tl.constexpr,
        EVEN_N2: tl.constexpr, CAUSAL: tl.constexpr, HAS_BIAS: tl.constexpr, PREC: tl.constexpr):
    # dK/dV of key tile j and dQ of query tile j in one program (delta computed beforehand): under the causal
    # mask the first key tiles see the most query tiles and the first query tiles the fewest keys, so each
    # program gets about the same work, and one launch replaces two.
    pid = tl.program_id(0)
    j = pid % NUM_J
    bh = pid // NUM_J
    if j < NUM_N:
        _dkdv_part(Q, K, V, B, DO, LSE, DELTA, DK, DV, DQ, scale, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb,
                   sbh, sbm, sbn, sdb, sdh, sdm, skb2, skh2, skn2, svb2, svh2, svn2, bh, j, H, GROUP, L, S, D, E,
                   BLOCK_M, BLOCK_N, EVEN_M, EVEN_N, CAUSAL, HAS_BIAS, PREC, 0, False, False)
    if j < NUM_M:
        _dq_part(Q, K, V, B, DO, O, LSE, DELTA, DQ, scale, sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sbb, sbh,
                 sbm, sbn, sdb, sdh, sdm, sob, soh, som, sqb2, sqh2, sqm2, bh, j, H, GROUP, L, S, D, E, BLOCK_M2,
                 BLOCK_N2, EVEN_M2, EVEN_N2, CAUSAL, HAS_BIAS, PREC, False, False)
'''
