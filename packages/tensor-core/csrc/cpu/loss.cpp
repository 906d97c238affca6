// Kernel family "loss": the fused log_softmax + nll pass of cross_entropy (and nll_loss on
// log-probabilities), and the embedding row gather and its dense backward. Class scores are
// (N, C) or (N, C, S) with any strides (classes on dim 1, as PyTorch's nll_loss2d: no copy to
// move them last); the other operands are contiguous. Targets and indices are int64 and
// validated here.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/prefetch.h"
#include "../common/tensor_arg.h"
#include "half_vec.h"
#include "reduce_simd.h"

namespace py = pybind11;

namespace ember {

namespace {

TensorArg contiguous_of(py::handle obj, DType dtype, int64_t numel, const char* what) {
  TensorArg a = unpack(obj);
  if (a.dtype != dtype || !a.is_contiguous() || a.numel() != numel)
    throw std::invalid_argument(std::string(what) + ": expected a contiguous tensor of " + std::to_string(numel) +
                                " elements");
  return a;
}

// Class scores as (N, C, S) with element strides (sn, sc, ss): a 2-d (N, C) input is S = 1,
// an (N, C, d1, ...) one has its trailing dims merged into S by the caller (a view when they
// can be). Row r = n * S + s holds the C scores of one sample and position.
struct ClassLayout {
  int64_t n = 0, c = 0, s = 1, sn = 0, sc = 0, ss = 0;
  int64_t rows() const { return n * s; }
  // Whether the positions are the contiguous dim (classes strided): the column kernels apply.
  bool columns() const { return s > 1 && ss == 1 && sc != 1 && c > 1; }
};

ClassLayout class_layout(const TensorArg& x, const char* what) {
  if (x.ndim() != 2 && x.ndim() != 3) throw std::invalid_argument(std::string(what) + ": input must be 2-d or 3-d");
  ClassLayout l;
  l.n = x.shape[0];
  l.c = x.shape[1];
  l.sn = x.strides[0];
  l.sc = x.strides[1];
  if (x.ndim() == 3) {
    l.s = x.shape[2];
    l.ss = x.strides[2];
  }
  return l;
}

void check_targets(const int64_t* tp, int64_t rows, int64_t c, int64_t ignore_index) {
  // Validated first so no partial result is written and no thread throws.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = tp[r];
    if (t != ignore_index && (t < 0 || t >= c)) throw std::out_of_range("Target " + std::to_string(t) + " is out of bounds.");
  }
}

// The rows of a (N, C, S) layout whose classes are not contiguous are copied into a row
// buffer first (a transposed 2-d input, channels-last scores): `row_at` returns the row's
// scores as a contiguous run.
template <typename T>
const T* row_at(const T* xp, const ClassLayout& l, int64_t r, T* buf) {
  const T* p = xp + (r / l.s) * l.sn + (r % l.s) * l.ss;
  if (l.sc == 1 || l.c <= 1) return p;
  for (int64_t i = 0; i < l.c; ++i) buf[i] = p[i * l.sc];
  return buf;
}

// Row r's scores, for a prefetch while the row before it computes: null past the thread's
// last row `end`, for rows that `row_at` gathers (classes strided) and for rows too long to
// sit in L1 beside the current one (kPrefetchRowBytes).
template <typename T>
const T* next_row(const T* xp, const ClassLayout& l, int64_t r, int64_t end) {
  if (r >= end || (l.sc != 1 && l.c > 1) || l.c * static_cast<int64_t>(sizeof(T)) > kPrefetchRowBytes) return nullptr;
  return xp + (r / l.s) * l.sn + (r % l.s) * l.ss;
}

// The log-sum-exp of one row, max + log(sum(exp(x - max))): NaN where the max is infinite
// (exp(inf - inf), exp(-inf + inf)) or a score is NaN, as PyTorch's log_softmax makes such a row.
// `next`: the row read after this one (may be null), prefetched during the exp pass (exp_sum).
template <typename T>
T row_lse(const T* row, int64_t c, const T* next = nullptr) {
  const T mx = minmax_contig<T, true>(row, c);
  return mx + std::log(exp_sum<T>(nullptr, row, c, mx, next));
}

// row_lse in one pass where it can (float32 with AVX-512): the exp sum is shifted by the
// row's target score g = x[t] instead of its max, so the row is read once and the max pass (a
// sixth of the row's time) goes. s = sum(exp(x - g)) = exp(lse - g) >= 1 (the target's own
// term is exactly 1), and log(s) is the row's loss: any finite s is taken (no term overflowed;
// the dominant terms' arguments x - g are as large as the loss, so rounding them costs what
// rounding the loss costs), and g + log(s) is formed in double. A NaN or +inf score, a term
// beyond exp's range (a loss above ~88) or a non-finite g go through row_lse instead, from
// cache. The result depends on the row alone (not on the rows or threads around it).
// *rel receives lse - g itself, formed without going through lse: log(s) on the shifted pass,
// (max - g) + log(sum) otherwise. Where |lse| is large its float rounding would swamp the loss
// (all scores 1e30: lse rounds to 1e30 and x[t] - lse to 0, where the loss is log(C)).
// With `ref` (not null) the score the sum was shifted by (g, or the max) goes to *ref and
// lse - *ref (log of the shifted sum) to *lsr: the label-smoothing term is formed from them.
template <typename T>
T row_lse_shifted(const T* row, int64_t c, const T* next, T g, T* rel, T* ref = nullptr, T* lsr = nullptr) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (std::isfinite(g)) {
      const float s = exp_guess_sum(row, c, g, next);
      if (s < INFINITY) {
        const double ls = std::log(static_cast<double>(s));
        *rel = static_cast<float>(ls);
        if (ref) {
          *ref = g;
          *lsr = static_cast<float>(ls);
        }
        return static_cast<float>(static_cast<double>(g) + ls);
      }
    }
  }
#endif
  const T mx = minmax_contig<T, true>(row, c);
  const T ls = std::log(exp_sum<T>(nullptr, row, c, mx, next));
  *rel = (mx - g) + ls;
  if (ref) {
    *ref = mx;
    *lsr = ls;
  }
  return mx + ls;
}

// Beyond this |lse| a saved lse's float rounding (|lse| * 2^-24 in the exponent) costs the
// gradient more relative accuracy than ~1.5e-5: the backward recomputes such rows from the
// scores (max, exp sum) instead of reading exp(x - lse).
template <typename T>
bool lse_exact_enough(T lse) {
  return !(std::abs(lse) > T(256));
}

// One row of class_nll: nll = w[t] * (lse - x[t]) (formed as row_lse_shifted's rel), smooth = sum_c w[c] (lse - x[c])
// formed as sum_c w[c] (ref - x[c]) + sum(w) (lse - ref), ref the score the exp sum was shifted by
// (PyTorch's -sum(w * log_softmax(x)) to rounding; -(sum(w x) - sum(w) lse) cancelled to its rounding
// once |lse| is large: 2e-4 relative at scores ~1e5, the whole term at 1e30),
// and the row's lse (row_lse: NaN for an infinite max, so such a row's loss and gradient are NaN)
// itself into *lse_out (null for log-probabilities), which the backward reads instead of
// recomputing it. `next`: the row read after this one, prefetched (row_lse).
template <typename T>
void nll_row(const T* row, int64_t c, int64_t t, const T* wp, bool log_probs, T* nll, T* smooth, T* wt,
             T* lse_out, const T* next) {
  T lse = 0;
  T w = wp ? wp[t] : T(1);
  T ref = 0, lsr = 0;  // (log-probabilities: lse = 0, so ref = 0 and lse - ref = 0)
  if (!log_probs) {
    T rel;
    lse = row_lse_shifted<T>(row, c, next, row[t], &rel, smooth ? &ref : nullptr, &lsr);
    if (lse_out) *lse_out = lse;
    *nll = w * rel;
  } else {
    *nll = -w * row[t];
  }
  *wt = w;
  if (smooth) {
    T s = 0;
    T wsum = 0;
    if (wp) {
      for (int64_t i = 0; i < c; ++i) {
        s += wp[i] * (ref - row[i]);
        wsum += wp[i];
      }
    } else {
      for (int64_t i = 0; i < c; ++i) s += ref - row[i];
      wsum = T(c);
    }
    *smooth = std::isnan(lse) ? lse : s + wsum * lsr;
  }
}

// Per position j of a column block of bl positions (classes strided by sc, positions
// contiguous): lse[j] (0 for log-probabilities; NaN where the max is infinite, as nll_row)
// and, with `wx`, the weighted class sum sum_c w[c] (x[c, j] - ref[j]), ref[j] the position's first
// finite score (0 if none, and 0 for log-probabilities; written to `ref`), so that the
// label-smoothing term sum(w) (lse - ref) - wx does not cancel where |lse| is large. The classes are walked in chunks
// that stay in L2 (kChunkBytes): the chunk's max (and the weighted sum) in one pass, the
// running sum of exp(x - max) in a second over the cached chunk, rescaled where a chunk raised
// the max, so the block is read from memory once and every pass streams whole row pieces.
// With `mx`/`logs`, each position's max and log(exp sum) as well (lse = mx + logs), from which
// the loss is formed without lse's rounding.
constexpr int64_t kColBlock = 1024;
constexpr int64_t kChunkBytes = 256 * 1024;

template <typename T>
void column_lse(const T* x, int64_t c, int64_t sc, int64_t bl, const T* wp, bool log_probs, T* lse, T* wx,
                const T* next = nullptr, T* mx = nullptr, T* logs = nullptr, T* ref = nullptr) {
  alignas(64) T m[kColBlock], s[kColBlock], mc[kColBlock], shift[kColBlock];
  for (int64_t j = 0; j < bl; ++j) {
    m[j] = -INFINITY;
    s[j] = 0;
    if (wx) {
      wx[j] = 0;
      ref[j] = 0;
      for (int64_t k = 0; !log_probs && k < c; ++k) {
        if (std::isfinite(x[k * sc + j])) {
          ref[j] = x[k * sc + j];
          break;
        }
      }
    }
  }
  const int64_t chunk = std::max<int64_t>(1, kChunkBytes / static_cast<int64_t>(bl * sizeof(T)));
  for (int64_t k0 = 0; k0 < c; k0 += chunk) {
    const int64_t k1 = std::min(c, k0 + chunk);
    std::copy(m, m + bl, mc);
    for (int64_t k = k0; k < k1; ++k) {
      const T* p = x + k * sc;
      if (!log_probs)
        for (int64_t j = 0; j < bl; ++j) mc[j] = p[j] > mc[j] ? p[j] : mc[j];
      if (wx) {
        const T w = wp ? wp[k] : T(1);
        for (int64_t j = 0; j < bl; ++j) wx[j] += w * (p[j] - ref[j]);
      }
    }
    if (!log_probs) add_exp_chunk(x, sc, k0, k1, bl, m, mc, s, shift, chunk, c, next);
  }
  for (int64_t j = 0; j < bl; ++j) {
    if (log_probs) lse[j] = 0;
    else if (std::isnan(s[j]) || std::isinf(m[j])) lse[j] = std::numeric_limits<T>::quiet_NaN();
    else lse[j] = m[j] + std::log(s[j]);
    if (mx) {
      mx[j] = m[j];
      logs[j] = std::log(s[j]);
    }
  }
}

#if defined(__AVX512F__)
// column_lse for float32 scores (no weighted class sum) in one pass, the column analog of
// row_lse_shifted: each position j's exp sum shifted by one of its own scores g[j] (the
// target's; the first class's for an ignored position), so s[j] >= 1 and no max pass or L2
// re-read is needed: the classes stream through once (rows of the block `sc` apart, the one
// `ahead` rows on prefetched, continuing into `next`'s rows). With `next_t` (the targets of the
// block at `next`, of the same width) the scores its gather will read are prefetched into L2
// as well, a few positions a class: that gather otherwise waits on up to bl lines spread over the
// whole next block (perf on (32, 100, 1024) scores: ~14% of the forward's samples on the
// vgatherqps before the pass, ~4% with the prefetch; session 17 in NOTES.md). Returns false,
// having written nothing usable, when a position's sum or shift is not finite (a NaN or +inf
// score, a loss beyond exp's range): the caller then takes column_lse for the block. rel[j] =
// log(s[j]) = lse[j] - g[j], the position's loss without lse's rounding (row_lse_shifted).
bool column_lse_shifted(const float* x, int64_t c, int64_t sc, int64_t bl, const float* g, float* lse, float* rel,
                        const float* next, const int64_t* next_t, int64_t ignore_index) {
  alignas(64) float s[kColBlock];
  std::fill(s, s + bl, 0.0f);
  const int64_t jv = bl / 16 * 16;
  constexpr int64_t ahead = 4;
  // The next block's target scores (ignored positions read class 0, as the caller's gather).
  const int64_t per = next_t ? (bl + c - 1) / c : 0;
  for (int64_t k = 0; k < c; ++k) {
    const float* p = x + k * sc;
    const float* pf = k + ahead < c ? p + ahead * sc : (next && k + ahead - c < c ? next + (k + ahead - c) * sc : nullptr);
    for (int64_t j = k * per, je = std::min(bl, j + per); j < je; ++j) {
      const int64_t t = next_t[j];
      __builtin_prefetch(next + (t == ignore_index ? 0 : t) * sc + j, 0, 2);
    }
    for (int64_t j = 0; j < jv; j += 16) {
      if (pf) __builtin_prefetch(pf + j, 0, 2);
      const __m512 e = exp_term_m512(_mm512_sub_ps(_mm512_loadu_ps(p + j), _mm512_loadu_ps(g + j)));
      _mm512_store_ps(s + j, _mm512_add_ps(_mm512_load_ps(s + j), e));
    }
    for (int64_t j = jv; j < bl; ++j) s[j] += exp_f32(p[j] - g[j]);
  }
  // lse = g + log(s), s >= 1 (the shift's own term is exactly 1): log_ge1_m512 (0.81 ulp) and
  // one float add, 16 positions at a time (a double log per position had been ~10% of the
  // forward on (32, 100, 1024) scores).
  const __m512 inf = _mm512_set1_ps(INFINITY);
  for (int64_t j = 0; j < jv; j += 16) {
    const __m512 sv = _mm512_load_ps(s + j), gv = _mm512_loadu_ps(g + j);
    // (s < inf is false for NaN; |g| < inf likewise.)
    const __mmask16 ok = _mm512_cmp_ps_mask(sv, inf, _CMP_LT_OQ) &
                         _mm512_cmp_ps_mask(_mm512_abs_ps(gv), inf, _CMP_LT_OQ);
    if (ok != 0xFFFF) return false;
    const __m512 ls = log_ge1_m512(sv);
    _mm512_storeu_ps(lse + j, _mm512_add_ps(gv, ls));
    _mm512_storeu_ps(rel + j, ls);
  }
  for (int64_t j = jv; j < bl; ++j) {
    if (!(s[j] < INFINITY) || !std::isfinite(g[j])) return false;
    const double ls = std::log(static_cast<double>(s[j]));
    lse[j] = static_cast<float>(static_cast<double>(g[j]) + ls);
    rel[j] = static_cast<float>(ls);
  }
  return true;
}
#endif

// For a column block whose classes fit in L2 together (kFuseBytes): q[k, j] = exp(x[k, j] - M[j])
// stored (q's classes sq apart) and total[j] = sum_k of them, M the column max (0 where it is
// -inf, so an all -inf column stores zeros and its total is 0). x is read from memory once (the
// max), again from L2 (the exponentials), with one exp an element.
constexpr int64_t kFuseBytes = 512 * 1024;

template <typename T>
void column_exp_store(const T* x, int64_t c, int64_t sc, int64_t bl, T* q, int64_t sq, T* total) {
  alignas(64) T m[kColBlock];
  for (int64_t j = 0; j < bl; ++j) {
    m[j] = -INFINITY;
    total[j] = 0;
  }
  for (int64_t k = 0; k < c; ++k) {
    const T* p = x + k * sc;
    for (int64_t j = 0; j < bl; ++j) m[j] = p[j] > m[j] ? p[j] : m[j];
  }
  for (int64_t j = 0; j < bl; ++j) m[j] = m[j] == -INFINITY ? T(0) : m[j];
  int64_t jv = 0;
  if constexpr (std::is_same_v<T, float>) jv = bl / kVecFloats * kVecFloats;
  for (int64_t k = 0; k < c; ++k) {
    const T* p = x + k * sc;
    T* o = q + k * sq;
    if constexpr (std::is_same_v<T, float>) {
      for (int64_t j = 0; j < jv; j += kVecFloats) {
        VecF xv, mv, tv;
        std::memcpy(&xv, p + j, sizeof(VecF));
        std::memcpy(&mv, m + j, sizeof(VecF));
        std::memcpy(&tv, total + j, sizeof(VecF));
        const VecF e = exp_vec(xv - mv);
        std::memcpy(o + j, &e, sizeof(VecF));
        tv += e;
        std::memcpy(total + j, &tv, sizeof(VecF));
      }
    }
    for (int64_t j = jv; j < bl; ++j) {
      o[j] = exp_scalar(p[j] - m[j]);
      total[j] += o[j];
    }
  }
}

// The float16/bfloat16 rows (defined below, beside the backward's float32 row kernels they use).
template <typename S>
void class_nll_half(const S* xp, const ClassLayout& l, const int64_t* tp, const float* wp, float* np, float* sp,
                    float* tw, float* lo, int64_t ignore_index, bool log_probs);

// Per row r of x (N, C, S): nll[r] = -w[t] * logp[t], smooth[r] = -sum_c w[c] * logp[c] and
// wt[r] = w[t], all 0 where t == ignore_index; with `lse` (not None; scores, not
// log-probabilities) lse[r] = logsumexp of the row as well (ignored rows included: their
// gradient is NaN where it is, as PyTorch's log_softmax backward makes it), which
// class_nll_backward takes back so that it reads each score once. logp is x itself when
// `log_probs`, else log_softmax(x) over the classes computed on the fly (max + log-sum-exp, never materialized).
// Classes along a strided dim with the positions contiguous ((N, C, H, W) scores) go through
// column blocks of positions (column_lse), with no copy of the scores.
void class_nll_impl(py::handle nll_obj, py::handle smooth_obj, py::handle wt_obj, py::handle lse_obj,
                    py::handle x_obj, py::handle target_obj, py::handle weight_obj, int64_t ignore_index,
                    bool log_probs) {
  TensorArg x = unpack(x_obj), target = unpack(target_obj);
  const ClassLayout l = class_layout(x, "class_nll");
  const int64_t rows = l.rows(), c = l.c;
  if (target.dtype != DType::Int64 || !target.is_contiguous() || target.numel() != rows)
    throw std::invalid_argument("class_nll: target must be contiguous int64 with one entry per row");
  // Half-type scores: float32 outputs and weight, the scores read as stored (class_nll_half).
  const bool half = x.dtype == DType::Float16 || x.dtype == DType::BFloat16;
  if (half && l.columns())
    throw std::invalid_argument("class_nll: float16/bfloat16 scores with strided classes and contiguous positions "
                                "are converted to float32 by the caller");
  const DType od = half ? DType::Float32 : x.dtype;
  char* nll = contiguous_of(nll_obj, od, rows, "class_nll nll").data;
  char* wt = contiguous_of(wt_obj, od, rows, "class_nll wt").data;
  char* smooth = smooth_obj.is_none() ? nullptr : contiguous_of(smooth_obj, od, rows, "class_nll smooth").data;
  char* weight = weight_obj.is_none() ? nullptr : contiguous_of(weight_obj, od, c, "class_nll weight").data;
  if (!lse_obj.is_none() && log_probs) throw std::invalid_argument("class_nll: no lse for log-probabilities");
  char* lse_out = lse_obj.is_none() ? nullptr : contiguous_of(lse_obj, od, rows, "class_nll lse").data;
  const int64_t* tp = reinterpret_cast<const int64_t*>(target.data);
  check_targets(tp, rows, c, ignore_index);
  if (rows == 0) return;
  py::gil_scoped_release release;
  if (half) {
    auto f = [](char* p) { return reinterpret_cast<float*>(p); };
    if (x.dtype == DType::BFloat16)
      class_nll_half<BFloat16>(reinterpret_cast<const BFloat16*>(x.data), l, tp, f(weight), f(nll), f(smooth), f(wt),
                               f(lse_out), ignore_index, log_probs);
    else
      class_nll_half<Half>(reinterpret_cast<const Half*>(x.data), l, tp, f(weight), f(nll), f(smooth), f(wt),
                           f(lse_out), ignore_index, log_probs);
    return;
  }
  EMBER_DISPATCH_FLOATING(x.dtype, "class_nll", [&] {
    using T = scalar_t;
    const T *xp = reinterpret_cast<const T*>(x.data), *wp = reinterpret_cast<const T*>(weight);
    T *np = reinterpret_cast<T*>(nll), *sp = reinterpret_cast<T*>(smooth), *tw = reinterpret_cast<T*>(wt);
    T* lo = reinterpret_cast<T*>(lse_out);
    if (l.columns()) {
      T wsum = T(c);
      if (wp) {
        wsum = 0;
        for (int64_t i = 0; i < c; ++i) wsum += wp[i];
      }
      const int64_t width = std::min(l.s, kColBlock), nblk = (l.s + width - 1) / width;
      parallel_for(l.n * nblk, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c * width, 1)),
                   [&](int64_t b0, int64_t b1) {
        alignas(64) T lse[kColBlock], wx[kColBlock], mx[kColBlock], logs[kColBlock], ref[kColBlock];
        alignas(64) float g[kColBlock];  // (float32 with AVX-512 only: the shifted pass)
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t n = b / nblk, p0 = (b % nblk) * width, bl = std::min(width, l.s - p0);
          const T* xb = xp + n * l.sn + p0;
          // The next block of this thread, prefetched during this one's last exp pass when it
          // has the same width.
          const T* xn = nullptr;
          if (b + 1 < b1) {
            const int64_t n1 = (b + 1) / nblk, q0 = ((b + 1) % nblk) * width;
            if (std::min(width, l.s - q0) == bl) xn = xp + n1 * l.sn + q0;
          }
          bool done = false;
          const T* picked = nullptr;  // the targets' scores, where the shifted pass gathered them
#if defined(__AVX512F__)
          if constexpr (std::is_same_v<T, float>) {
            if (!log_probs && !sp) {
              // (The casts: this lambda is no template, so the branch compiles for every T.)
              const float* xf = reinterpret_cast<const float*>(xb);
              const int64_t r0 = n * l.s + p0;
              for (int64_t j = 0; j < bl; ++j) {
                const int64_t t = tp[r0 + j];
                g[j] = xf[(t == ignore_index ? 0 : t) * l.sc + j];
              }
              const int64_t* tn = xn ? tp + ((b + 1) / nblk) * l.s + ((b + 1) % nblk) * width : nullptr;
              done = column_lse_shifted(xf, c, l.sc, bl, g, reinterpret_cast<float*>(lse),
                                        reinterpret_cast<float*>(logs), reinterpret_cast<const float*>(xn), tn,
                                        ignore_index);
              if (done) picked = reinterpret_cast<const T*>(g);
            }
          }
#endif
          if (!done) column_lse<T>(xb, c, l.sc, bl, wp, log_probs, lse, sp ? wx : nullptr, xn, mx, logs, ref);
          const int64_t r0 = n * l.s + p0;
          for (int64_t j = 0; j < bl; ++j) {
            const int64_t t = tp[r0 + j];
            if (lo) lo[r0 + j] = lse[j];
            if (t == ignore_index) {
              np[r0 + j] = tw[r0 + j] = T(0);
              if (sp) sp[r0 + j] = T(0);
              continue;
            }
            const T w = wp ? wp[t] : T(1);
            // The loss from its parts (row_lse_shifted's rel): the shifted pass's log(s), or
            // (max - x[t]) + log(sum); log-probabilities: -x[t].
            const T xt = picked ? picked[j] : xb[t * l.sc + j];
            np[r0 + j] = log_probs ? -w * xt : w * (picked ? logs[j] : (mx[j] - xt) + logs[j]);
            tw[r0 + j] = w;
            // sum_c w[c] (lse - x[c]) = sum(w) (lse - ref) - wx, lse - ref = (max - ref) + log(sum):
            // no cancellation where |lse| is large (log-probabilities: ref = 0, lse = 0).
            if (sp) {
              const T lr = log_probs ? T(0) : std::isnan(lse[j]) ? lse[j] : (mx[j] - ref[j]) + logs[j];
              sp[r0 + j] = wsum * lr - wx[j];
            }
          }
        }
      });
      return;
    }
    parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c, 1)), [&](int64_t r0, int64_t r1) {
      std::vector<T> buf(l.sc == 1 ? 0 : static_cast<size_t>(c));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = tp[r];
        if (t == ignore_index) {
          np[r] = T(0);
          tw[r] = T(0);
          if (sp) sp[r] = T(0);
          if (lo) lo[r] = row_lse<T>(row_at<T>(xp, l, r, buf.data()), c);
          continue;
        }
        nll_row<T>(row_at<T>(xp, l, r, buf.data()), c, t, wp, log_probs, np + r, sp ? sp + r : nullptr, tw + r,
                   lo ? lo + r : nullptr, next_row<T>(xp, l, r + 1, r1));
      }
    });
  });
}

// The gradient of class_nll with respect to x (N, C, S):
//   dx[r, i] = p[r, i] * (a[r] + s[r] * sum(w)) - s[r] * w[i] - (i == t[r]) * a[r]
// with a = g_nll * w[t], s = g_smooth (0 without smoothing), p = softmax(x) = exp(x - lse) (0
// for log-probability inputs); rows whose target is ignore_index get 0 * p: 0, or NaN throughout
// where the row's lse is NaN (an infinite max, a NaN score), as PyTorch's log_softmax backward
// gives them. With the forward's saved lse (class_nll's lse output) every element is that
// formula in one pass over x, one read and one write (nll_row_backward_lse). Without it the
// lse is recomputed per row: the softmax in the row's cache-resident output (a max pass, an exp
// pass, a scale pass).
// grad_input is contiguous (N, C, S); with the positions contiguous in x too it is written by
// column blocks: with the saved lse one pass over the classes; without it, where the block's
// classes fit in L2 (kFuseBytes) the exponentials are stored first and scaled in place
// (column_exp_store: x read from memory once, one exp an element), otherwise the lse of each
// position first (column_lse), then one pass over the classes.
template <typename T>
void nll_row_backward(T* o, const T* row, int64_t c, int64_t t, T a, T s, bool has_s, const T* wp, T wsum,
                      bool log_probs, const T* next) {
  if (log_probs) {
    std::fill(o, o + c, T(0));
  } else {
    const T mx = minmax_contig<T, true>(row, c);
    const T total = exp_sum<T>(o, row, c, mx, next);
    const T scale = (a + s * wsum) / total;
    for (int64_t i = 0; i < c; ++i) o[i] *= scale;
  }
  if (has_s) {
    if (wp) {
      for (int64_t i = 0; i < c; ++i) o[i] -= s * wp[i];
    } else {
      for (int64_t i = 0; i < c; ++i) o[i] -= s;
    }
  }
  o[t] -= a;
}

// o[i] = exp(x[i] - lse) * scale - s * w[i] (w[i] = 1 without weights; the s term only with
// has_s), then o[t] -= a: one row of the gradient from its saved lse, x read once.
template <typename T>
void nll_row_backward_lse(T* o, const T* row, int64_t c, int64_t t, T a, T s, bool has_s, const T* wp, T wsum,
                          T lse) {
  const T scale = a + s * wsum;
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    const VecF zero = VecF{};
    for (; i + kVecFloats <= c; i += kVecFloats) {
      VecF xv;
      std::memcpy(&xv, row + i, sizeof(VecF));
      VecF r = exp_vec(xv - lse) * scale;
      if (has_s) {
        if (wp) {
          VecF wv;
          std::memcpy(&wv, wp + i, sizeof(VecF));
          r -= wv * s;
        } else {
          r -= zero + s;
        }
      }
      std::memcpy(o + i, &r, sizeof(VecF));
    }
  }
  for (; i < c; ++i) o[i] = exp_scalar(row[i] - lse) * scale - (has_s ? s * (wp ? wp[i] : T(1)) : T(0));
  o[t] -= a;
}

// ------------------------------------------------------------------ float16 / bfloat16 scores
// Half-type scores are read as they are stored and computed in float32 registers (HalfVec,
// half_vec.h): no widened float32 copy of the (N, C) scores, whose write and re-read had cost
// more than the kernel itself (bfloat16 (256, 50257) cross-entropy: 1.3x PyTorch's time). The
// per-row outputs (nll, wt, smooth, lse) and the gradient's inputs are float32; the gradient is
// written in the scores' dtype, each element rounded once. Rows whose classes are contiguous
// take the one-pass loops below; any other row (classes strided, label smoothing,
// log-probabilities, the fallback of a non-finite shifted sum) is widened into a float32 row
// buffer that stays in cache and goes through the float32 code. Classes on a strided dim with
// the positions contiguous (the column kernels) are not taken here: the caller converts.

// A row of c scores (sc apart) as float32 in buf.
template <typename S>
const float* widen_row(const S* p, int64_t c, int64_t sc, float* buf) {
  int64_t i = 0;
#if EMBER_HALF_VEC
  if (sc == 1)
    for (; i + 16 <= c; i += 16) _mm512_storeu_ps(buf + i, HalfVec<S>::load(p + i));
#endif
  for (; i < c; ++i) buf[i] = Compute<S>::load(p[i * sc]);
  return buf;
}

#if EMBER_HALF_VEC
// exp_guess_sum (reduce_simd.h) over a contiguous half-type run: the same terms, each vector
// of 16 scores widened in registers. `next`: prefetched a line (32 scores) per 32 consumed.
template <typename S>
float exp_guess_sum_half(const S* x, int64_t n, float c, const S* next) {
  const __m512 cv = _mm512_set1_ps(c);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if (next) __builtin_prefetch(next + i, 0, 3);
    a0 = _mm512_add_ps(a0, exp_term_m512(_mm512_sub_ps(HalfVec<S>::load(x + i), cv)));
    a1 = _mm512_add_ps(a1, exp_term_m512(_mm512_sub_ps(HalfVec<S>::load(x + i + 16), cv)));
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    a0 = _mm512_add_ps(a0, exp_term_m512(_mm512_sub_ps(HalfVec<S>::load_masked(x + i, k, -INFINITY), cv)));
  }
  alignas(64) float l[16];
  _mm512_store_ps(l, _mm512_add_ps(a0, a1));
  float s = 0;
  for (int j = 0; j < 16; ++j) s += l[j];
  return s;
}

// nll_row_backward_lse for a contiguous half-type row written as the half type: each element
// exp(x - lse) * scale - s * w[i] in float32, rounded once; the target's element (which also
// takes -a) computed on its own afterwards, so it too is rounded once.
template <typename S>
void nll_row_backward_lse_half(S* o, const S* row, int64_t c, int64_t t, float a, float s, bool has_s,
                               const float* wp, float wsum, float lse) {
  const float scale = a + s * wsum;
  const __m512 lv = _mm512_set1_ps(lse), cv = _mm512_set1_ps(scale), sv = _mm512_set1_ps(s);
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < c; i += 16) {
    const __mmask16 k = c - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - i)) - 1);
    const __m512 xv = k == 0xFFFF ? HalfVec<S>::load(row + i) : HalfVec<S>::load_masked(row + i, k, 0.0f);
    __m512 r = _mm512_mul_ps((__m512)exp_vec((VecF)_mm512_sub_ps(xv, lv)), cv);
    if (has_s) r = _mm512_fnmadd_ps(wp ? _mm512_maskz_loadu_ps(k, wp + i) : one, sv, r);
    if (k == 0xFFFF) HalfVec<S>::store(o + i, r);
    else HalfVec<S>::store_masked(o + i, k, r);
  }
  const float xt = Compute<S>::load(row[t]);
  const float rt = exp_f32(xt - lse) * scale - (has_s ? s * (wp ? wp[t] : 1.0f) : 0.0f);
  o[t] = Compute<S>::store(rt - a);
}
#endif

template <typename S>
void class_nll_half(const S* xp, const ClassLayout& l, const int64_t* tp, const float* wp, float* np, float* sp,
                    float* tw, float* lo, int64_t ignore_index, bool log_probs) {
  const int64_t rows = l.rows(), c = l.c;
  const bool contiguous_rows = l.sc == 1 || c <= 1;
  parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<size_t>(c));
    for (int64_t r = r0; r < r1; ++r) {
      const S* p = xp + (r / l.s) * l.sn + (r % l.s) * l.ss;
      const int64_t t = tp[r];
#if EMBER_HALF_VEC
      if (t != ignore_index && !log_probs && !sp && contiguous_rows) {
        // row_lse_shifted's one pass, shifted by the target's score.
        const float g = Compute<S>::load(p[t]);
        if (std::isfinite(g)) {
          const S* next = nullptr;
          if (r + 1 < r1 && c * static_cast<int64_t>(sizeof(S)) <= kPrefetchRowBytes)
            next = xp + ((r + 1) / l.s) * l.sn + ((r + 1) % l.s) * l.ss;
          const float s = exp_guess_sum_half<S>(p, c, g, next);
          if (s < INFINITY) {
            const double ls = std::log(static_cast<double>(s));
            const float lse = static_cast<float>(static_cast<double>(g) + ls);
            const float w = wp ? wp[t] : 1.0f;
            np[r] = w * static_cast<float>(ls);
            tw[r] = w;
            if (lo) lo[r] = lse;
            continue;
          }
        }
      }
#endif
      (void)contiguous_rows;
      const float* row = widen_row<S>(p, c, l.sc, buf.data());
      if (t == ignore_index) {
        np[r] = tw[r] = 0.0f;
        if (sp) sp[r] = 0.0f;
        if (lo) lo[r] = row_lse<float>(row, c);
        continue;
      }
      nll_row<float>(row, c, t, wp, log_probs, np + r, sp ? sp + r : nullptr, tw + r, lo ? lo + r : nullptr, nullptr);
    }
  });
}

template <typename S>
void class_nll_backward_half(S* out, const S* xp, const ClassLayout& l, const int64_t* tp, const float* gn,
                             const float* gs, const float* wp, const float* saved, int64_t ignore_index,
                             bool log_probs) {
  const int64_t rows = l.rows(), c = l.c;
  float wsum = static_cast<float>(c);
  if (wp) {
    wsum = 0;
    for (int64_t i = 0; i < c; ++i) wsum += wp[i];
  }
  parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<size_t>(c)), obuf(static_cast<size_t>(c));
    for (int64_t r = r0; r < r1; ++r) {
      const S* p = xp + (r / l.s) * l.sn + (r % l.s) * l.ss;
      // grad_input is contiguous (N, C, S): a row's classes are S apart.
      S* dst = out + (r / l.s) * c * l.s + (r % l.s);
      const int64_t t = tp[r];
      const float* o = obuf.data();
      if (t == ignore_index) {
        const float lse = log_probs ? 0.0f : saved ? saved[r] : row_lse<float>(widen_row<S>(p, c, l.sc, buf.data()), c);
        const S fill = Compute<S>::store(std::isnan(lse) ? std::numeric_limits<float>::quiet_NaN() : 0.0f);
        for (int64_t i = 0; i < c; ++i) dst[i * l.s] = fill;
        continue;
      }
      const float a = gn ? gn[r] * (wp ? wp[t] : 1.0f) : 0.0f;
      const float s = gs ? gs[r] : 0.0f;
      const bool use_saved = saved && lse_exact_enough(saved[r]);  // else recomputed from the row
#if EMBER_HALF_VEC
      if (use_saved && !log_probs && l.sc == 1 && l.s == 1) {
        nll_row_backward_lse_half<S>(dst, p, c, t, a, s, gs != nullptr, wp, wsum, saved[r]);
        continue;
      }
#endif
      const float* row = widen_row<S>(p, c, l.sc, buf.data());
      if (use_saved && !log_probs)
        nll_row_backward_lse<float>(obuf.data(), row, c, t, a, s, gs != nullptr, wp, wsum, saved[r]);
      else
        nll_row_backward<float>(obuf.data(), row, c, t, a, s, gs != nullptr, wp, wsum, log_probs, nullptr);
      for (int64_t i = 0; i < c; ++i) dst[i * l.s] = Compute<S>::store(o[i]);
    }
  });
}

void class_nll_backward_impl(py::handle dx_obj, py::handle gnll_obj, py::handle gsmooth_obj, py::handle x_obj,
                             py::handle target_obj, py::handle weight_obj, int64_t ignore_index, bool log_probs,
                             py::handle lse_obj) {
  TensorArg x = unpack(x_obj), target = unpack(target_obj);
  const ClassLayout l = class_layout(x, "class_nll_backward");
  const int64_t rows = l.rows(), c = l.c;
  if (target.dtype != DType::Int64 || !target.is_contiguous() || target.numel() != rows)
    throw std::invalid_argument("class_nll_backward: target must be contiguous int64 with one entry per row");
  // Half-type scores (class_nll_backward_half): grad_input in their dtype, the rest float32.
  const bool half = x.dtype == DType::Float16 || x.dtype == DType::BFloat16;
  if (half && l.columns())
    throw std::invalid_argument("class_nll_backward: float16/bfloat16 scores with strided classes and contiguous "
                                "positions are converted to float32 by the caller");
  const DType od = half ? DType::Float32 : x.dtype;
  char* dx = contiguous_of(dx_obj, x.dtype, rows * c, "class_nll_backward grad_input").data;
  char* gnll = gnll_obj.is_none() ? nullptr : contiguous_of(gnll_obj, od, rows, "class_nll_backward grad").data;
  char* gsm = gsmooth_obj.is_none() ? nullptr : contiguous_of(gsmooth_obj, od, rows, "class_nll_backward grad").data;
  char* weight = weight_obj.is_none() ? nullptr : contiguous_of(weight_obj, od, c, "class_nll_backward weight").data;
  // The saved lse is only read for scores (log-probabilities have none).
  char* lse_in = lse_obj.is_none() || log_probs ? nullptr
                                                : contiguous_of(lse_obj, od, rows, "class_nll_backward lse").data;
  const int64_t* tp = reinterpret_cast<const int64_t*>(target.data);
  check_targets(tp, rows, c, ignore_index);
  if (rows == 0 || c == 0) return;
  py::gil_scoped_release release;
  if (half) {
    auto f = [](char* p) { return reinterpret_cast<const float*>(p); };
    if (x.dtype == DType::BFloat16)
      class_nll_backward_half<BFloat16>(reinterpret_cast<BFloat16*>(dx), reinterpret_cast<const BFloat16*>(x.data), l,
                                        tp, f(gnll), f(gsm), f(weight), f(lse_in), ignore_index, log_probs);
    else
      class_nll_backward_half<Half>(reinterpret_cast<Half*>(dx), reinterpret_cast<const Half*>(x.data), l, tp,
                                    f(gnll), f(gsm), f(weight), f(lse_in), ignore_index, log_probs);
    return;
  }
  EMBER_DISPATCH_FLOATING(x.dtype, "class_nll_backward", [&] {
    using T = scalar_t;
    const T *xp = reinterpret_cast<const T*>(x.data), *wp = reinterpret_cast<const T*>(weight);
    const T *gn = reinterpret_cast<const T*>(gnll), *gs = reinterpret_cast<const T*>(gsm);
    const T* saved = reinterpret_cast<const T*>(lse_in);
    T* out = reinterpret_cast<T*>(dx);
    T wsum = T(c);
    if (wp) {
      wsum = 0;
      for (int64_t i = 0; i < c; ++i) wsum += wp[i];
    }
    if (l.columns()) {
      const int64_t width = std::min(l.s, kColBlock), nblk = (l.s + width - 1) / width;
      parallel_for(l.n * nblk, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c * width, 1)),
                   [&](int64_t b0, int64_t b1) {
        alignas(64) T lse[kColBlock], scale[kColBlock], sg[kColBlock], av[kColBlock];
        const bool smoothing = gs != nullptr;
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t n = b / nblk, p0 = (b % nblk) * width, bl = std::min(width, l.s - p0);
          const int64_t r0 = n * l.s + p0;
          const T* xb = xp + n * l.sn + p0;
          T* ob = out + n * c * l.s + p0;
          // A block with a saved lse too large to be exact (lse_exact_enough) is recomputed.
          bool use_saved = saved != nullptr;
          for (int64_t j = 0; use_saved && j < bl; ++j) use_saved = lse_exact_enough(saved[r0 + j]);
          const bool fuse = !log_probs && !use_saved && c * bl * int64_t(sizeof(T)) <= kFuseBytes;
          if (use_saved) std::copy(saved + r0, saved + r0 + bl, lse);
          else if (fuse) column_exp_store<T>(xb, c, l.sc, bl, ob, l.s, lse);  // lse holds the totals
          else column_lse<T>(xb, c, l.sc, bl, wp, log_probs, lse, nullptr);
          for (int64_t j = 0; j < bl; ++j) {
            const int64_t t = tp[r0 + j];
            const bool ignored = t == ignore_index;  // zeroed below, whatever the values
            av[j] = ignored || !gn ? T(0) : gn[r0 + j] * (wp ? wp[t] : T(1));
            sg[j] = ignored || !gs ? T(0) : gs[r0 + j];
            scale[j] = av[j] + sg[j] * wsum;
            if (fuse) scale[j] /= lse[j];
          }
          if (fuse) {
            // q = e * (a + s sum(w)) / total - s w[k], the exponentials read back from L2.
            for (int64_t k = 0; k < c; ++k) {
              T* q = ob + k * l.s;
              const T wk = wp ? wp[k] : T(1);
              if (gs)
                for (int64_t j = 0; j < bl; ++j) q[j] = q[j] * scale[j] - sg[j] * wk;
              else
                for (int64_t j = 0; j < bl; ++j) q[j] *= scale[j];
            }
          } else {
          // p = exp(x - lse), NaN throughout a position whose max is infinite (its lse is NaN).
          for (int64_t k = 0; k < c; ++k) {
            const T* p = xb + k * l.sc;
            T* q = ob + k * l.s;
            const T wk = wp ? wp[k] : T(1);
            int64_t j = 0;
            if (!log_probs) {
              if constexpr (std::is_same_v<T, float>) {
                // Two loops: `gs` is a captured reference, which gcc reloaded and tested on
                // every vector of a single loop (the stores to q may alias it, as it sees them).
                if (smoothing) {
                  const float swk = static_cast<float>(wk);
                  for (; j + kVecFloats <= bl; j += kVecFloats) {
                    VecF xv, lv, cv, gv;
                    std::memcpy(&xv, p + j, sizeof(VecF));
                    std::memcpy(&lv, lse + j, sizeof(VecF));
                    std::memcpy(&cv, scale + j, sizeof(VecF));
                    std::memcpy(&gv, sg + j, sizeof(VecF));
                    const VecF r = exp_vec(xv - lv) * cv - gv * swk;
                    std::memcpy(q + j, &r, sizeof(VecF));
                  }
                } else {
                  for (; j + kVecFloats <= bl; j += kVecFloats) {
                    VecF xv, lv, cv;
                    std::memcpy(&xv, p + j, sizeof(VecF));
                    std::memcpy(&lv, lse + j, sizeof(VecF));
                    std::memcpy(&cv, scale + j, sizeof(VecF));
                    const VecF r = exp_vec(xv - lv) * cv;
                    std::memcpy(q + j, &r, sizeof(VecF));
                  }
                }
              }
              for (; j < bl; ++j) q[j] = exp_scalar(p[j] - lse[j]) * scale[j] - (gs ? sg[j] * wk : T(0));
            } else if (gs) {
              for (; j < bl; ++j) q[j] = -sg[j] * wk;
            } else {
              std::fill(q, q + bl, T(0));
            }
          }
          }
          for (int64_t j = 0; j < bl; ++j) {
            const int64_t t = tp[r0 + j];
            if (t == ignore_index) {
              // the fused path's lse[j] is the exponentials' total: 0 or NaN for a NaN lse
              const bool nan_row = !log_probs && (std::isnan(lse[j]) || (fuse && lse[j] == T(0)));
              const T fill = nan_row ? std::numeric_limits<T>::quiet_NaN() : T(0);
              for (int64_t k = 0; k < c; ++k) ob[k * l.s + j] = fill;
            } else {
              ob[t * l.s + j] -= av[j];
            }
          }
        }
      });
      return;
    }
    parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c, 1)), [&](int64_t r0, int64_t r1) {
      std::vector<T> buf(l.sc == 1 ? 0 : static_cast<size_t>(c));
      std::vector<T> obuf(l.s == 1 ? 0 : static_cast<size_t>(c));
      for (int64_t r = r0; r < r1; ++r) {
        // grad_input is contiguous (N, C, S): a row's classes are S apart.
        T* dst = out + (r / l.s) * c * l.s + (r % l.s);
        T* o = l.s == 1 ? dst : obuf.data();
        const int64_t t = tp[r];
        if (t == ignore_index) {
          const T lse = log_probs ? T(0) : saved ? saved[r] : row_lse<T>(row_at<T>(xp, l, r, buf.data()), c);
          std::fill(o, o + c, std::isnan(lse) ? std::numeric_limits<T>::quiet_NaN() : T(0));
        } else {
          const T a = gn ? gn[r] * (wp ? wp[t] : T(1)) : T(0);
          const T s = gs ? gs[r] : T(0);
          if (saved && lse_exact_enough(saved[r]))
            nll_row_backward_lse<T>(o, row_at<T>(xp, l, r, buf.data()), c, t, a, s, gs != nullptr, wp, wsum, saved[r]);
          else
            nll_row_backward<T>(o, row_at<T>(xp, l, r, buf.data()), c, t, a, s, gs != nullptr, wp, wsum, log_probs,
                                next_row<T>(xp, l, r + 1, r1));
        }
        if (l.s != 1)
          for (int64_t i = 0; i < c; ++i) dst[i * l.s] = o[i];
      }
    });
  });
}

// out[i, :] = weight[idx[i], :] for a contiguous (V, D) weight: embedding's row gather.
void embedding_impl(py::handle out_obj, py::handle weight_obj, py::handle idx_obj) {
  TensorArg w = unpack(weight_obj), idx = unpack(idx_obj), out = unpack(out_obj);
  if (w.ndim() != 2 || !w.is_contiguous()) throw std::invalid_argument("embedding: weight must be contiguous 2-d");
  if (idx.dtype != DType::Int64 || !idx.is_contiguous()) throw std::invalid_argument("embedding: indices must be contiguous int64");
  int64_t v = w.shape[0], d = w.shape[1], n = idx.numel();
  if (out.dtype != w.dtype || !out.is_contiguous() || out.numel() != n * d)
    throw std::invalid_argument("embedding: out must be contiguous (num_indices, D) in weight's dtype");
  const int64_t* ip = reinterpret_cast<const int64_t*>(idx.data);
  for (int64_t i = 0; i < n; ++i)
    if (ip[i] < 0 || ip[i] >= v) throw std::out_of_range("index out of range in self");
  size_t row_bytes = static_cast<size_t>(d) * w.elem_size();
  const char* src = w.data;
  char* dst = out.data;
  py::gil_scoped_release release;
  parallel_for(n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(d, 1)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) std::memcpy(dst + i * row_bytes, src + ip[i] * row_bytes, row_bytes);
  });
}

// grad_weight (V, D, zero-filled by the caller) += grad rows at idx, skipping padding_idx.
// Threads own disjoint column ranges, so the accumulation order is deterministic.
void embedding_backward_impl(py::handle gw_obj, py::handle grad_obj, py::handle idx_obj, int64_t padding_idx) {
  TensorArg gw = unpack(gw_obj), grad = unpack(grad_obj), idx = unpack(idx_obj);
  if (gw.ndim() != 2 || !gw.is_contiguous()) throw std::invalid_argument("embedding_backward: bad grad_weight");
  int64_t v = gw.shape[0], d = gw.shape[1], n = idx.numel();
  if (idx.dtype != DType::Int64 || !idx.is_contiguous()) throw std::invalid_argument("embedding_backward: bad indices");
  if (grad.dtype != gw.dtype || !grad.is_contiguous() || grad.numel() != n * d)
    throw std::invalid_argument("embedding_backward: grad must be contiguous (num_indices, D)");
  const int64_t* ip = reinterpret_cast<const int64_t*>(idx.data);
  for (int64_t i = 0; i < n; ++i)
    if (ip[i] < 0 || ip[i] >= v) throw std::out_of_range("index out of range in self");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(gw.dtype, "embedding_backward", [&] {
    using T = scalar_t;
    T* out = reinterpret_cast<T*>(gw.data);
    const T* g = reinterpret_cast<const T*>(grad.data);
    parallel_for(d, 16, [&](int64_t c0, int64_t c1) {
      for (int64_t i = 0; i < n; ++i) {
        if (ip[i] == padding_idx) continue;
        T* o = out + ip[i] * d;
        const T* s = g + i * d;
        for (int64_t c = c0; c < c1; ++c) o[c] += s[c];
      }
    });
  });
}

}  // namespace

void bind_loss(py::module_& m) {
  m.def("class_nll", &class_nll_impl, py::arg("nll"), py::arg("smooth"), py::arg("wt"), py::arg("lse"),
        py::arg("input"), py::arg("target"), py::arg("weight"), py::arg("ignore_index"), py::arg("log_probs"),
        "Per-row weighted negative log-likelihood (and label-smoothing term, and log-sum-exp) of class scores.");
  m.def("class_nll_backward", &class_nll_backward_impl, py::arg("grad_input"), py::arg("grad_nll"),
        py::arg("grad_smooth"), py::arg("input"), py::arg("target"), py::arg("weight"), py::arg("ignore_index"),
        py::arg("log_probs"), py::arg("lse") = py::none(),
        "Gradient of class_nll with respect to its input, one pass per row (from the forward's lse if given).");
  m.def("embedding", &embedding_impl, py::arg("out"), py::arg("weight"), py::arg("indices"));
  m.def("embedding_backward", &embedding_backward_impl, py::arg("grad_weight"), py::arg("grad"),
        py::arg("indices"), py::arg("padding_idx"));
}

}  // namespace ember
