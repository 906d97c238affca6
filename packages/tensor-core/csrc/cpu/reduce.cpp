// Reductions (sum, prod, max/min, any/all, norms, arg-reductions), scans (cumsum/cumprod)
// and softmax/log_softmax. The Python side permutes the reduced dims last and converts
// float16/bfloat16 to float32; every kernel here works on compute dtypes only.
//
// A reduction picks one of three loops from the shared layout (reduce_layout.h):
//  - inner: each output folds a contiguous run; 16 independent accumulators vectorize it
//    and, for float sums, keep the error low (blocks of 4096 are then folded in order);
//  - outer: the reduced dims are outer and the kept innermost dim is contiguous: a block
//    of outputs accumulates row after row (vectorized across outputs);
//  - strided: anything else, one output at a time.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../common/alias_free.h"
#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/prefetch.h"
#include "../common/tensor_arg.h"
#include "../common/stream_store.h"
#include "../common/vecmath.h"
#include "reduce_layout.h"
#include "reduce_simd.h"
#include "reduce_ops.h"

namespace py = pybind11;

namespace ember {

namespace {

enum class RedOp : int { Sum, NanSum, Prod, Max, Min, Any, All, CountNonzero, AbsSum, SumSq, PowSum, AbsMax, AbsMin };

constexpr int kLanes = 16;
// Independent accumulators of fold_block: four 512-bit vectors' worth for 4- and 8-byte
// accumulators (one vector add chain is latency-bound at ~16 floats per 4 cycles; four keep
// the adders busy), kLanes for narrower or wider types.
template <typename Acc>
constexpr int lanes_for() {
  return sizeof(Acc) == 4 || sizeof(Acc) == 8 ? 256 / static_cast<int>(sizeof(Acc)) : kLanes;
}
constexpr int64_t kBlock = 4096;
constexpr int64_t kOuterBlock = 64;
constexpr int64_t kWideBlock = 1024;

// Width of the column blocks of an outer-dim walk over `rows` groups of `inner` contiguous
// columns: whole rows up to kWideBlock, narrower (never under 64) only when the blocks would
// not give every thread one.
inline int64_t wide_block(int64_t inner, int64_t rows) {
  if (inner <= 0) return 1;  // no columns: any positive width (callers divide by it)
  int64_t width = std::min(inner, kWideBlock);
  const int64_t threads = get_num_threads();
  if (threads > 1 && rows * ((inner + width - 1) / width) < threads) {
    const int64_t per = (inner + threads - 1) / threads;
    width = std::max<int64_t>(std::min<int64_t>(64, inner), (per + 15) / 16 * 16);
    width = std::min(width, kWideBlock);
  }
  return width;
}

// Rows of a softmax column block that stay in L2 between two passes over them.
constexpr int64_t kChunkBytes = 256 * 1024;

// lanes[0] = the pairwise fold of lanes[0, 2 * W). A constant width per level lets gcc keep
// the wide levels in vector registers (a loop over a variable width ran as scalar adds through
// the stack: ~30% of a 1024-float row's sum).
template <int W, typename Acc, typename Op>
inline void fold_halves(const Op& op, Acc* lanes) {
  if constexpr (W >= 1) {
    for (int j = 0; j < W; ++j) lanes[j] = op.merge(lanes[j], lanes[j + W]);
    fold_halves<W / 2>(op, lanes);
  }
}

// One block of a contiguous run with kLanes independent accumulators. Kept out of line:
// inlined into the callers' loops, gcc 12 turns `lanes` into scalars and stops vectorizing.
template <typename T, typename Acc, typename Op>
__attribute__((noinline)) Acc fold_block(const Op& op, const T* p, int64_t len) {
  constexpr int L = lanes_for<Acc>();
  Acc lanes[L];
  for (int j = 0; j < L; ++j) lanes[j] = op.init();
  int64_t i = 0;
  for (; i + L <= len; i += L) {
    for (int j = 0; j < L; ++j) lanes[j] = op.step(lanes[j], p[i + j]);
  }
  Acc tail = op.init();
  for (; i < len; ++i) tail = op.step(tail, p[i]);
  fold_halves<L / 2>(op, lanes);
  return op.merge(lanes[0], tail);
}

// Folds partial results pairwise, like a binary counter (PyTorch's cascade sum): n partials
// see about log2(n) rounding steps each instead of n.
template <typename Acc, typename Op>
struct Cascade {
  const Op& op;
  Acc levels[64];
  uint64_t count = 0;

  explicit Cascade(const Op& o) : op(o) {}
  void add(Acc v) {
    int lv = 0;
    for (uint64_t c = count; c & 1u; c >>= 1, ++lv) v = op.merge(levels[lv], v);
    levels[lv] = v;
    ++count;
  }
  Acc result() const {
    Acc total = op.init();
    for (int lv = 0; (count >> lv) != 0; ++lv) {
      if ((count >> lv) & 1u) total = op.merge(levels[lv], total);
    }
    return total;
  }
};

template <typename T, typename Acc, typename Op>
Acc fold_run(const Op& op, const T* x, int64_t n, int64_t stride) {
  if (stride != 1 || n < 2 * kLanes) {
    Acc acc = op.init();
    for (int64_t i = 0; i < n; ++i) acc = op.step(acc, x[i * stride]);
    return acc;
  }
  if constexpr (std::is_floating_point_v<T> && std::is_same_v<Op, MaxF<T>>) {
    return op.merge(op.init(), minmax_contig<T, true>(x, n));
  } else if constexpr (std::is_floating_point_v<T> && std::is_same_v<Op, MinF<T>>) {
    return op.merge(op.init(), minmax_contig<T, false>(x, n));
  }
  if (n <= kBlock) return fold_block<T, Acc>(op, x, n);
  Cascade<Acc, Op> total(op);
  for (int64_t start = 0; start < n; start += kBlock) {
    total.add(fold_block<T, Acc>(op, x + start, std::min(kBlock, n - start)));
  }
  return total.result();
}

template <typename T, typename Acc, typename Op>
void reduce_kernel(const Op& op, const TensorArg& out, const TensorArg& in, int64_t nred) {
  ReduceLayout L = make_reduce_layout(out, in, nred);
  if (L.num_out == 0) return;
  const T* x = reinterpret_cast<const T*>(in.data);
  Acc* o = reinterpret_cast<Acc*>(out.data);
  if (L.reduce_numel == 0) {
    for (int64_t i = 0; i < L.num_out; ++i) {
      int64_t io, oo;
      L.offsets(i, io, oo);
      o[oo] = op.init();
    }
    return;
  }
  const int64_t ntab = static_cast<int64_t>(L.table.size());
  const bool outer = L.run_stride != 1 && !L.out_shape.empty() && L.out_in_stride.back() == 1 &&
                     L.out_shape.back() >= 8;
  if (outer) {
    // Blocks of whole row pieces (up to kWideBlock outputs): every reduced row is then read as
    // one contiguous stretch. Narrow blocks walk a column strip with the row stride, which for
    // power-of-two widths maps every row onto the same cache sets and runs at a fraction of
    // the memory bandwidth.
    const int64_t inner = L.out_shape.back();
    const int64_t rows = L.num_out / inner;
    const int64_t width = wide_block(inner, rows);
    const int64_t nblk_row = (inner + width - 1) / width;
    const int64_t ostride = L.out_stride.back();
    const int64_t grain = std::max<int64_t>(1, kGrainSize / (L.reduce_numel * width));
    parallel_for(rows * nblk_row, grain, [&](int64_t b0, int64_t b1) {
      Acc acc[kWideBlock];
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t row = b / nblk_row, j0 = (b % nblk_row) * width;
        const int64_t bl = std::min(width, inner - j0);
        int64_t io, oo;
        L.offsets(row * inner + j0, io, oo);
        for (int64_t j = 0; j < bl; ++j) acc[j] = op.init();
        for (int64_t t = 0; t < ntab; ++t) {
          const T* base = x + io + L.table[t];
          for (int64_t k = 0; k < L.run_len; ++k) {
            const T* p = base + k * L.run_stride;
            for (int64_t j = 0; j < bl; ++j) acc[j] = op.step(acc[j], p[j]);
          }
        }
        for (int64_t j = 0; j < bl; ++j) o[oo + j * ostride] = acc[j];
      }
    });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kGrainSize / L.reduce_numel);
  parallel_for(L.num_out, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      int64_t io, oo;
      L.offsets(i, io, oo);
      if (ntab == 1) {
        o[oo] = fold_run<T, Acc>(op, x + io, L.run_len, L.run_stride);
        continue;
      }
      Cascade<Acc, Op> acc(op);
      for (int64_t t = 0; t < ntab; ++t) acc.add(fold_run<T, Acc>(op, x + io + L.table[t], L.run_len, L.run_stride));
      o[oo] = acc.result();
    }
  });
}

void check_out(const TensorArg& out, DType want) {
  if (out.dtype != want) throw std::invalid_argument("reduce: output dtype does not match the accumulator dtype");
}

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::UInt8;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::Int8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::Int16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::Int32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  else if constexpr (std::is_same_v<T, float>) return DType::Float32;
  else return DType::Float64;
}

template <typename T>
void run_reduce(RedOp op, const TensorArg& out, const TensorArg& in, int64_t nred, double p) {
  using SA = sum_acc_t<T>;
  auto go = [&](DType want, auto f) {
    using Acc = decltype(f.init());
    check_out(out, want);
    py::gil_scoped_release release;
    reduce_kernel<T, Acc>(f, out, in, nred);
  };
  constexpr bool floating = std::is_floating_point_v<T>;
  switch (op) {
    case RedOp::Sum: go(dtype_of<SA>(), SumF<T, SA>{}); return;
    case RedOp::NanSum: go(dtype_of<SA>(), NanSumF<T, SA>{}); return;
    case RedOp::Prod: go(dtype_of<SA>(), ProdF<T, SA>{}); return;
    case RedOp::Max: go(in.dtype, MaxF<T>{}); return;
    case RedOp::Min: go(in.dtype, MinF<T>{}); return;
    case RedOp::Any: go(DType::Bool, AnyF<T>{}); return;
    case RedOp::All: go(DType::Bool, AllF<T>{}); return;
    case RedOp::CountNonzero: go(DType::Int64, CountNonzeroF<T>{}); return;
    default: break;
  }
  if constexpr (floating) {
    switch (op) {
      case RedOp::AbsSum: go(in.dtype, AbsSumF<T>{}); return;
      case RedOp::SumSq: go(in.dtype, SumSqF<T>{}); return;
      case RedOp::PowSum: go(in.dtype, PowSumF<T>{static_cast<T>(p)}); return;
      case RedOp::AbsMax: go(in.dtype, AbsMaxF<T>{}); return;
      case RedOp::AbsMin: go(in.dtype, AbsMinF<T>{}); return;
      default: break;
    }
  }
  throw std::invalid_argument("reduce: op not supported for this dtype");
}

void reduce_impl(int code, py::handle out_obj, py::handle in_obj, int64_t nred, double p) {
  if (code < 0 || code > static_cast<int>(RedOp::AbsMin)) throw std::invalid_argument("reduce: bad op code");
  TensorArg out = unpack(out_obj), in = unpack(in_obj);
  EMBER_DISPATCH_COMPUTE(in.dtype, "reduce", [&] { run_reduce<scalar_t>(static_cast<RedOp>(code), out, in, nred, p); });
}

// argmax/argmin with values: the first maximum (or the first NaN) wins; the index counts
// reduced positions in row-major order.
template <typename T>
void arg_reduce_kernel(bool is_max, const TensorArg& vals, const TensorArg& idx, const TensorArg& in, int64_t nred) {
  ReduceLayout L = make_reduce_layout(vals, in, nred);
  ReduceLayout Li = make_reduce_layout(idx, in, nred);
  if (L.reduce_numel == 0 && L.num_out > 0) throw std::out_of_range("arg reduction over an empty dimension");
  const T* x = reinterpret_cast<const T*>(in.data);
  T* v = reinterpret_cast<T*>(vals.data);
  int64_t* ix = reinterpret_cast<int64_t*>(idx.data);
  const int64_t ntab = static_cast<int64_t>(L.table.size());
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, L.reduce_numel));
  parallel_for(L.num_out, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      int64_t io, oo, io2, oi;
      L.offsets(i, io, oo);
      Li.offsets(i, io2, oi);
      T best = x[io + L.table[0]];
      int64_t bi = 0, pos = 0;
      bool done = is_nan_v(best);
      for (int64_t t = 0; t < ntab && !done; ++t) {
        const T* p = x + io + L.table[t];
        for (int64_t k = 0; k < L.run_len; ++k, ++pos) {
          T c = p[k * L.run_stride];
          if (is_nan_v(c)) {
            best = c;
            bi = pos;
            done = true;
            break;
          }
          if (is_max ? (c > best) : (c < best)) {
            best = c;
            bi = pos;
          }
        }
      }
      v[oo] = best;
      ix[oi] = bi;
    }
  });
}

void arg_reduce_impl(bool is_max, py::handle vals_obj, py::handle idx_obj, py::handle in_obj, int64_t nred) {
  TensorArg vals = unpack(vals_obj), idx = unpack(idx_obj), in = unpack(in_obj);
  if (vals.dtype != in.dtype || idx.dtype != DType::Int64) throw std::invalid_argument("arg_reduce: bad output dtypes");
  EMBER_DISPATCH_COMPUTE(in.dtype, "arg_reduce", [&] {
    py::gil_scoped_release release;
    arg_reduce_kernel<scalar_t>(is_max, vals, idx, in, nred);
  });
}

// Scans along the last dim (the Python side moves the scanned dim last in both views).
// codes: 0 cumsum, 1 cumprod. Floats accumulate in double, like PyTorch's CPU scan.
template <typename T>
void scan_kernel(int code, const TensorArg& out, const TensorArg& in) {
  const int64_t nd = in.ndim();
  if (out.shape != in.shape || nd == 0) throw std::invalid_argument("scan: shapes differ");
  const int64_t len = in.shape[nd - 1];
  const int64_t rows = len == 0 ? 0 : in.numel() / len;
  const int64_t si = in.strides[nd - 1], so = out.strides[nd - 1];
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  const T* x = reinterpret_cast<const T*>(in.data);
  T* o = reinterpret_cast<T*>(out.data);
  parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, len)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t io = 0, oo = 0, rem = r;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t k = rem % in.shape[d];
        rem /= in.shape[d];
        io += k * in.strides[d];
        oo += k * out.strides[d];
      }
      Acc acc = code == 0 ? Acc(0) : Acc(1);
      for (int64_t k = 0; k < len; ++k) {
        Acc xv = static_cast<Acc>(x[io + k * si]);
        acc = code == 0 ? wrapping_add(acc, xv) : wrapping_mul(acc, xv);
        o[oo + k * so] = static_cast<T>(acc);
      }
    }
  });
}

void scan_impl(int code, py::handle out_obj, py::handle in_obj) {
  if (code != 0 && code != 1) throw std::invalid_argument("scan: bad op code");
  TensorArg out = unpack(out_obj), in = unpack(in_obj);
  if (out.dtype != in.dtype) throw std::invalid_argument("scan: dtypes differ");
  EMBER_DISPATCH_COMPUTE(in.dtype, "scan", [&] {
    if constexpr (!std::is_same_v<scalar_t, bool>) {
      py::gil_scoped_release release;
      scan_kernel<scalar_t>(code, out, in);
    } else {
      throw std::invalid_argument("scan: bool is not supported");
    }
  });
}

// cummax/cummin along the last dim: a NaN always takes over, ties move the index forward
// (PyTorch's rule: update when x is NaN or, with no NaN so far, x >= best / x <= best).
template <typename T>
void scan_indexed_kernel(bool is_max, const TensorArg& vals, const TensorArg& idx, const TensorArg& in) {
  const int64_t nd = in.ndim();
  if (vals.shape != in.shape || idx.shape != in.shape || nd == 0) throw std::invalid_argument("cummax: shapes differ");
  const int64_t len = in.shape[nd - 1];
  const int64_t rows = len == 0 ? 0 : in.numel() / len;
  const T* x = reinterpret_cast<const T*>(in.data);
  T* v = reinterpret_cast<T*>(vals.data);
  int64_t* ix = reinterpret_cast<int64_t*>(idx.data);
  parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, len)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t io = 0, vo = 0, xo = 0, rem = r;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t k = rem % in.shape[d];
        rem /= in.shape[d];
        io += k * in.strides[d];
        vo += k * vals.strides[d];
        xo += k * idx.strides[d];
      }
      T best = x[io];
      int64_t bi = 0;
      for (int64_t k = 0; k < len; ++k) {
        const T c = x[io + k * in.strides[nd - 1]];
        if (is_nan_v(c) || (!is_nan_v(best) && (is_max ? c >= best : c <= best))) {
          best = c;
          bi = k;
        }
        v[vo + k * vals.strides[nd - 1]] = best;
        ix[xo + k * idx.strides[nd - 1]] = bi;
      }
    }
  });
}

void scan_indexed_impl(bool is_max, py::handle vals_obj, py::handle idx_obj, py::handle in_obj) {
  TensorArg vals = unpack(vals_obj), idx = unpack(idx_obj), in = unpack(in_obj);
  if (vals.dtype != in.dtype || idx.dtype != DType::Int64) throw std::invalid_argument("cummax: bad output dtypes");
  EMBER_DISPATCH_COMPUTE(in.dtype, "cummax", [&] {
    py::gil_scoped_release release;
    scan_indexed_kernel<scalar_t>(is_max, vals, idx, in);
  });
}

// softmax over the middle dim of a contiguous (outer, n, inner) block.
// `next`: the row read after this one (may be null), prefetched during the exp pass.
template <typename T>
void softmax_rows(T* o, const T* x, int64_t n, bool log, const T* next) {
  const T m = minmax_contig<T, true>(x, n);
  T s;
  if constexpr (std::is_same_v<T, float>) {
    s = exp_shift_sum(log ? nullptr : o, x, n, m, next);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = std::exp(x[i] - m);
    s = fold_run<T, T>(SumF<T, T>{}, o, n, 1);
  }
  if (log) {
    // (x - m) - log(s), as PyTorch: folding m + log(s) into one shift first rounds it to the
    // precision of m (1e4 + log 5 in float32 loses 5e-4).
    const T ls = std::log(s);
    for (int64_t i = 0; i < n; ++i) o[i] = (x[i] - m) - ls;
  } else {
    const T inv = T(1) / s;
    for (int64_t i = 0; i < n; ++i) o[i] *= inv;
  }
}

#if defined(__AVX512F__)
// The column statistics of softmax_cols for float32 in one read of x a chunk: per chunk of rows
// (kChunkBytes, so it stays in L2), the chunk's column max and the sum of exp(x - c) are taken
// in the same pass, c being the shift of the chunks before it (the running max as of the last
// time it was raised). Where the chunk's max exceeds c + 2 (always in the first chunk, and
// wherever a column was all -inf so far), that vector of 16 columns takes the new max as its
// shift, its sum so far is rescaled, and its chunk sum is taken again from L2 with exp_vec; else
// the chunk's terms, at most e^2 each, are added as they are. The terms go through
// exp_term_m512 (2.7 ulp; common/vecmath.h): they only feed the sum, whose own rounding over a
// column is larger, and the outputs keep exp_vec. Outputs: m[j] = the column max, s[j] = the
// sum of exp(x - m) (as softmax_cols' two-pass form; NaN where a NaN was summed, 0 for an all
// -inf column) and shift[j] = m[j], or 0 where m[j] is -inf.
// A column's chunks then cost one exp an element instead of a max pass from memory and an exp
// pass from L2 after it: (4096, 1024) over dim 0, one thread, alternated in one process at load
// 15, softmax 2.67 -> 2.44 ms, log_softmax 2.29 -> 1.97 ms (a stand-alone copy at load 5: 2.0-2.1
// -> 1.6-1.7 ms; session 16 in NOTES.md).
// Arrays sit away from the rows modulo 4 KiB (common/alias_free.h).
void softmax_col_stats_f32(const float* x, int64_t n, int64_t inner, int64_t bl, float* m, float* s,
                           float* shift) {
  alignas(64) float pool[alias_free_pool_floats(4, kWideBlock)];
  float* c = alias_free_slot(pool, x, 0, kWideBlock);   // the shift of the sums so far
  float* mc = alias_free_slot(pool, x, 1, kWideBlock);  // the chunk's max
  float* a = alias_free_slot(pool, x, 2, kWideBlock);   // the chunk's sum against c
  float* sh = alias_free_slot(pool, x, 3, kWideBlock);  // c, or 0 where c is -inf
  const int64_t nv = (bl + 15) / 16;
  const __mmask16 tail = bl % 16 ? __mmask16((1u << (bl % 16)) - 1) : __mmask16(0xFFFF);
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  const __mmask16 all = 0xFFFF;  // the zero-masked forms: gcc 12 warns on the plain ones (exp_vec)
  for (int64_t v = 0; v < nv; ++v) {
    _mm512_store_ps(c + 16 * v, ninf);
    _mm512_store_ps(s + 16 * v, _mm512_setzero_ps());
    _mm512_store_ps(m + 16 * v, ninf);
    _mm512_store_ps(sh + 16 * v, _mm512_setzero_ps());
  }
  const int64_t chunk = std::max<int64_t>(1, kChunkBytes / static_cast<int64_t>(bl * sizeof(float)));
  for (int64_t k0 = 0; k0 < n; k0 += chunk) {
    const int64_t k1 = std::min(n, k0 + chunk);
    for (int64_t v = 0; v < nv; ++v) {
      _mm512_store_ps(mc + 16 * v, ninf);
      _mm512_store_ps(a + 16 * v, _mm512_setzero_ps());
    }
    // vmaxps(x, mc) returns mc where x is NaN: NaN stays out of the max and reaches the sum.
    for (int64_t k = k0; k < k1; ++k) {
      const float* p = x + k * inner;
      for (int64_t v = 0; v < nv; ++v) {
        const __m512 xv = v + 1 < nv ? _mm512_loadu_ps(p + 16 * v) : _mm512_mask_loadu_ps(ninf, tail, p + 16 * v);
        _mm512_store_ps(mc + 16 * v, _mm512_maskz_max_ps(all, xv, _mm512_load_ps(mc + 16 * v)));
        const __m512 e = exp_term_m512(_mm512_sub_ps(xv, _mm512_load_ps(sh + 16 * v)));
        _mm512_store_ps(a + 16 * v, _mm512_add_ps(_mm512_load_ps(a + 16 * v), e));
      }
    }
    for (int64_t v = 0; v < nv; ++v) {
      const __m512 cv = _mm512_load_ps(c + 16 * v), mcv = _mm512_load_ps(mc + 16 * v);
      _mm512_store_ps(m + 16 * v, _mm512_maskz_max_ps(all, mcv, _mm512_load_ps(m + 16 * v)));
      // (-inf + 2 is -inf: a column all -inf so far takes any finite chunk max as its shift.)
      const __mmask16 rose = _mm512_cmp_ps_mask(mcv, _mm512_add_ps(cv, _mm512_set1_ps(2.0f)), _CMP_GT_OQ);
      if (!rose) {
        _mm512_store_ps(s + 16 * v, _mm512_add_ps(_mm512_load_ps(s + 16 * v), _mm512_load_ps(a + 16 * v)));
        continue;
      }
      const __m512 cn = _mm512_maskz_max_ps(all, mcv, cv);
      const __mmask16 cn_inf = _mm512_cmp_ps_mask(cn, ninf, _CMP_EQ_OQ);
      const __mmask16 cv_inf = _mm512_cmp_ps_mask(cv, ninf, _CMP_EQ_OQ);
      const __m512 shn = _mm512_maskz_mov_ps(static_cast<__mmask16>(~cn_inf), cn);
      // The sum so far against the new shift (0 where it was empty: no exp(-inf + inf)).
      __m512 acc = _mm512_maskz_mul_ps(static_cast<__mmask16>(~cv_inf), _mm512_load_ps(s + 16 * v),
                                       (__m512)exp_vec((VecF)_mm512_sub_ps(cv, cn)));
      for (int64_t k = k0; k < k1; ++k) {
        const float* p = x + k * inner + 16 * v;
        const __m512 xv = v + 1 < nv ? _mm512_loadu_ps(p) : _mm512_mask_loadu_ps(ninf, tail, p);
        acc = _mm512_add_ps(acc, (__m512)exp_vec((VecF)_mm512_sub_ps(xv, shn)));
      }
      _mm512_store_ps(s + 16 * v, acc);
      _mm512_store_ps(c + 16 * v, cn);
      _mm512_store_ps(sh + 16 * v, shn);
    }
  }
  // The sums against the max: s * exp(c - m) with c <= m <= c + 2 (equal after a redo).
  for (int64_t j = 0; j < bl; ++j) {
    if (m[j] != -INFINITY && c[j] != m[j]) s[j] = static_cast<float>(double(s[j]) * std::exp(double(c[j]) - double(m[j])));
    shift[j] = m[j] == -INFINITY ? 0.0f : m[j];
  }
}
#endif

// softmax over n rows of the column block [j0, j0 + bl) of a contiguous (n, inner) slab, in
// two passes over the rows. The first walks them in chunks small enough to stay in L2
// (kChunkBytes): the chunk's column max updates the running max M (rescaling the running sum S
// where M grows), then S += exp(x - M) over the chunk, read again from L2. The second writes
// exp(x - M) / S (log_softmax: (x - M) - log(S)). x is read from memory twice and o written
// once; every pass streams whole row pieces (a narrow strided column walk, which would keep a
// column block in cache between the passes, is several times slower here: it defeats the
// prefetchers and touches a page a row). Storing exp(x - M) in the first pass instead of
// recomputing it costs a read and a write of o, more than the exp. float32 with AVX-512 takes the
// first pass as one read a chunk (softmax_col_stats_f32 above).
template <typename T>
void softmax_cols(T* o, const T* x, int64_t n, int64_t inner, int64_t j0, int64_t bl, bool log, bool stream) {
  alignas(64) T m[kWideBlock], s[kWideBlock], shift[kWideBlock], mc[kWideBlock];
  int64_t jv = 0;  // columns [0, jv) go through whole vectors (float32 only)
  if constexpr (std::is_same_v<T, float>) jv = bl / kVecFloats * kVecFloats;
  bool fused = false;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    softmax_col_stats_f32(x + j0, n, inner, bl, m, s, shift);
    fused = true;
  }
#endif
  if (!fused) {
    for (int64_t j = 0; j < bl; ++j) {
      m[j] = -INFINITY;
      s[j] = 0;
    }
    const int64_t chunk = std::max<int64_t>(1, kChunkBytes / static_cast<int64_t>(bl * sizeof(T)));
    for (int64_t k0 = 0; k0 < n; k0 += chunk) {
      const int64_t k1 = std::min(n, k0 + chunk);
      std::copy(m, m + bl, mc);
      // NaN wins no comparison, so it stays out of the max; it reaches S through exp.
      for (int64_t k = k0; k < k1; ++k) {
        const T* p = x + k * inner + j0;
        for (int64_t j = 0; j < bl; ++j) mc[j] = p[j] > mc[j] ? p[j] : mc[j];
      }
      add_exp_chunk(x + j0, inner, k0, k1, bl, m, mc, s, shift, chunk, n);
    }
  }
  // The result: (x - M) - log(S), as PyTorch (see softmax_rows; an all -inf column gives NaN,
  // as there), or exp(x - M) / S (an all -inf column is 0 / 0, NaN, as PyTorch's).
  for (int64_t j = 0; j < bl; ++j) s[j] = log ? std::log(s[j]) : T(1) / s[j];
  // Plain stores where o sits less than kStoreShadow bytes after x modulo 4 KiB (stream_clear_of,
  // common/stream_store.h): the distance is the same for every row (x and o advance together).
  // Measured on the Zen 4 machine (session 17, NOTES.md), the output pass of a (4096, 1024) float32
  // softmax over dim 0 with x at offset 16: o 48 bytes after x 4.3 ms streamed, 1.95 with plain
  // stores; o 1072 bytes after, 1.15-1.33 streamed, 1.37-1.57 plain. (Walking the row downward
  // instead was slower at every distance: 2.6-2.8 ms.)
  if (!stream_clear_of(o + j0, x + j0)) stream = false;
  for (int64_t k = 0; k < n; ++k) {
    const T* p = x + k * inner + j0;
    T* q = o + k * inner + j0;
    int64_t j = 0;
    if constexpr (std::is_same_v<T, float>) {
      for (; j < jv; j += kVecFloats) {
        VecF xv, mv, sv;
        std::memcpy(&xv, p + j, sizeof(VecF));
        std::memcpy(&sv, s + j, sizeof(VecF));
        VecF r;
        if (log) {
          std::memcpy(&mv, m + j, sizeof(VecF));
          r = (xv - mv) - sv;
        } else {
          std::memcpy(&mv, shift + j, sizeof(VecF));
          r = exp_vec(xv - mv) * sv;
        }
        store_vec(q + j, r, stream);
      }
    }
    for (; j < bl; ++j) q[j] = log ? (p[j] - m[j]) - s[j] : exp_scalar(p[j] - shift[j]) * s[j];
  }
}

void softmax_impl(py::handle out_obj, py::handle in_obj, int64_t outer, int64_t n, int64_t inner, bool log) {
  TensorArg out = unpack(out_obj), in = unpack(in_obj);
  if (out.dtype != in.dtype || !out.is_contiguous() || !in.is_contiguous() || out.shape != in.shape)
    throw std::invalid_argument("softmax: expected contiguous input and output of one dtype and shape");
  int64_t total = 0;
  if (outer < 0 || n < 0 || inner < 0 || __builtin_mul_overflow(outer, n, &total) ||
      __builtin_mul_overflow(total, inner, &total) || total != in.numel())
    throw std::invalid_argument("softmax: bad (outer, n, inner) split");
  if (in.numel() == 0) return;
  EMBER_DISPATCH_FLOATING(in.dtype, "softmax", [&] {
    using T = scalar_t;
    const T* x = reinterpret_cast<const T*>(in.data);
    T* o = reinterpret_cast<T*>(out.data);
    py::gil_scoped_release release;
    if (inner == 1) {
      parallel_for(outer, std::max<int64_t>(1, kGrainSize / n), [&](int64_t r0, int64_t r1) {
        const bool pf = n * static_cast<int64_t>(sizeof(T)) <= kPrefetchRowBytes;
        for (int64_t r = r0; r < r1; ++r)
          softmax_rows<T>(o + r * n, x + r * n, n, log, pf && r + 1 < r1 ? x + (r + 1) * n : nullptr);
      });
      return;
    }
    const int64_t width = wide_block(inner, outer);
    const int64_t nblk = (inner + width - 1) / width;
    // The output is written in the last pass, after x was read twice: streamed when large.
    const bool stream = stream_output(in.numel() * static_cast<int64_t>(sizeof(T)));
    parallel_for(outer * nblk, std::max<int64_t>(1, kGrainSize / (n * width)), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t r = b / nblk, j0 = (b % nblk) * width;
        softmax_cols<T>(o + r * n * inner, x + r * n * inner, n, inner, j0, std::min(width, inner - j0), log,
                        stream);
      }
      stream_fence(stream);
    });
  });
}

// -- var / std moments ---------------------------------------------------------------------

// Sum of double(x[i]) and, second pass, of (x[i] - mean)^2 over a contiguous run, in double
// lanes (gcc leaves a plain double reduction of floats scalar: it may not reassociate).
template <typename T>
double sum_as_double(const T* x, int64_t n, double shift, bool square) {
  typedef double VD __attribute__((vector_size(32)));
  typedef T VT __attribute__((vector_size(4 * sizeof(T))));
  VD acc[4] = {VD{}, VD{}, VD{}, VD{}};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int u = 0; u < 4; ++u) {
      VT v;
      std::memcpy(&v, x + i + 4 * u, sizeof(VT));
      VD d = __builtin_convertvector(v, VD) - shift;
      acc[u] += square ? d * d : d;
    }
  }
  VD a = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  double s = (a[0] + a[1]) + (a[2] + a[3]);
  for (; i < n; ++i) {
    double d = double(x[i]) - shift;
    s += square ? d * d : d;
  }
  return s;
}

// Sums of d and d^2 for d = double(x[i]) - shift over a float32 run, in one pass (var_mean's
// rows: the shifted one-pass formula of its column blocks). With shift = x[0], which lies within
// sqrt(n) standard deviations of the mean, sum d^2 - (sum d)^2 / n cancels at most about
// log2(n) of double's 53 bits: far more than float32's result needs.
inline void shifted_moments(const float* x, int64_t n, double shift, double& sum, double& sumsq) {
  typedef double VD __attribute__((vector_size(kVecBytes)));
  typedef float VT __attribute__((vector_size(kVecBytes / 2)));
  constexpr int L = kVecBytes / 8;
  VD s0 = VD{}, s1 = VD{}, q0 = VD{}, q1 = VD{};
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    VT v0, v1;
    std::memcpy(&v0, x + i, sizeof(VT));
    std::memcpy(&v1, x + i + L, sizeof(VT));
    const VD d0 = __builtin_convertvector(v0, VD) - shift, d1 = __builtin_convertvector(v1, VD) - shift;
    s0 += d0;
    s1 += d1;
    q0 += d0 * d0;
    q1 += d1 * d1;
  }
  s0 += s1;
  q0 += q1;
  double s = 0, q = 0;
  for (int j = 0; j < L; ++j) {
    s += s0[j];
    q += q0[j];
  }
  for (; i < n; ++i) {
    const double d = double(x[i]) - shift;
    s += d;
    q += d * d;
  }
  sum = s;
  sumsq = q;
}

// s[j] += sum_k d and q[j] += sum_k d^2 for d = double(x[k * inner + j]) - c[j], k < n, j < bl:
// four rows per step, so the accumulators are loaded and stored once per four rows.
inline void shifted_column_moments(const float* x, int64_t n, int64_t inner, int64_t bl, const double* c,
                                   double* s, double* q) {
  typedef double VD __attribute__((vector_size(kVecBytes)));
  typedef float VT __attribute__((vector_size(kVecBytes / 2)));
  constexpr int L = kVecBytes / 8;
  const int64_t jv = bl / L * L;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const float* p = x + k * inner;
    for (int64_t j = 0; j < jv; j += L) {
      VD cv, sv, qv;
      std::memcpy(&cv, c + j, sizeof(VD));
      std::memcpy(&sv, s + j, sizeof(VD));
      std::memcpy(&qv, q + j, sizeof(VD));
      VT v0, v1, v2, v3;
      std::memcpy(&v0, p + j, sizeof(VT));
      std::memcpy(&v1, p + inner + j, sizeof(VT));
      std::memcpy(&v2, p + 2 * inner + j, sizeof(VT));
      std::memcpy(&v3, p + 3 * inner + j, sizeof(VT));
      const VD d0 = __builtin_convertvector(v0, VD) - cv, d1 = __builtin_convertvector(v1, VD) - cv;
      const VD d2 = __builtin_convertvector(v2, VD) - cv, d3 = __builtin_convertvector(v3, VD) - cv;
      sv += (d0 + d1) + (d2 + d3);
      qv += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
      std::memcpy(s + j, &sv, sizeof(VD));
      std::memcpy(q + j, &qv, sizeof(VD));
    }
    for (int64_t j = jv; j < bl; ++j) {
      for (int u = 0; u < 4; ++u) {
        const double d = double(p[u * inner + j]) - c[j];
        s[j] += d;
        q[j] += d * d;
      }
    }
  }
  for (; k < n; ++k) {
    const float* p = x + k * inner;
    for (int64_t j = 0; j < bl; ++j) {
      const double d = double(p[j]) - c[j];
      s[j] += d;
      q[j] += d * d;
    }
  }
}

// var and mean over the middle dim of a contiguous (outer, n, inner) block, PyTorch's two-pass
// formula with double accumulators: mean = sum(x) / n, var = sum((x - mean)^2) / max(0, n - c).
// A row (inner == 1) stays in cache for both passes; column blocks are described below.
void var_mean_impl(py::handle var_obj, py::handle mean_obj, py::handle in_obj, int64_t outer, int64_t n,
                   int64_t inner, double correction, bool take_sqrt) {
  // std: the square root of the double variance, before rounding to T (the std of float32
  // [3e38, -1] is finite while its variance overflows float32).
  const auto root = [take_sqrt](double v) { return take_sqrt ? std::sqrt(v) : v; };
  TensorArg var = unpack(var_obj), mean = unpack(mean_obj), in = unpack(in_obj);
  if (var.dtype != in.dtype || mean.dtype != in.dtype || !in.is_contiguous() || !var.is_contiguous() ||
      !mean.is_contiguous())
    throw std::invalid_argument("var_mean: expected contiguous input and outputs of one dtype");
  int64_t total = 0;
  if (outer < 0 || n < 0 || inner < 0 || __builtin_mul_overflow(outer, n, &total) ||
      __builtin_mul_overflow(total, inner, &total) || total != in.numel() || var.numel() != outer * inner ||
      mean.numel() != outer * inner)
    throw std::invalid_argument("var_mean: bad (outer, n, inner) split");
  const double dof = std::max(0.0, double(n) - correction);
  EMBER_DISPATCH_FLOATING(in.dtype, "var_mean", [&] {
    using T = scalar_t;
    const T* x = reinterpret_cast<const T*>(in.data);
    T* vp = reinterpret_cast<T*>(var.data);
    T* mp = reinterpret_cast<T*>(mean.data);
    py::gil_scoped_release release;
    if (inner == 1) {
      parallel_for(outer, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* row = x + r * n;
          if constexpr (std::is_same_v<T, float>) {
            // One pass (as the column blocks below): d = x - x[0] in double.
            if (n > 0) {
              double sd, sq;
              shifted_moments(reinterpret_cast<const float*>(row), n, double(row[0]), sd, sq);
              if (std::isfinite(sq)) {
                const double mu = sd / double(n);
                vp[r] = T(root(std::max(0.0, sq - sd * mu) / dof));
                mp[r] = T(double(row[0]) + mu);
                continue;
              }
            }
          }
          // float64, and float32 rows holding inf or NaN: two passes.
          const double mu = sum_as_double(row, n, 0.0, false) / double(n);
          vp[r] = T(root(sum_as_double(row, n, mu, true) / dof));
          mp[r] = T(mu);
        }
      });
      return;
    }
    // Column blocks of whole row pieces (see wide_block). float32 takes one pass: sums of
    // d = x - x[0] and d^2 in double, var = (sum d^2 - (sum d)^2 / n) / dof. The shift by the
    // column's first value keeps the cancellation small, and double carries 29 more bits than
    // the float32 result needs. float64 keeps the two passes (mean, then squared deviations).
    const int64_t width = wide_block(inner, outer);
    const int64_t nblk = (inner + width - 1) / width;
    parallel_for(outer * nblk, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n * width, 1)),
                 [&](int64_t b0, int64_t b1) {
      alignas(64) double s[kWideBlock], q[kWideBlock], c[kWideBlock];
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t r = blk / nblk, j0 = (blk % nblk) * width, bl = std::min(width, inner - j0);
        const T* base = x + r * n * inner + j0;
        for (int64_t j = 0; j < bl; ++j) s[j] = q[j] = 0;
        if (n == 0) {
          for (int64_t j = 0; j < bl; ++j) vp[r * inner + j0 + j] = mp[r * inner + j0 + j] = T(NAN);
          continue;
        }
        if constexpr (std::is_same_v<T, float>) {
          for (int64_t j = 0; j < bl; ++j) c[j] = double(base[j]);
          shifted_column_moments(reinterpret_cast<const float*>(base), n, inner, bl, c, s, q);
          for (int64_t j = 0; j < bl; ++j) {
            const double mu = s[j] / double(n);
            const double m2 = std::max(0.0, q[j] - s[j] * mu);
            vp[r * inner + j0 + j] = T(root(m2 / dof));
            mp[r * inner + j0 + j] = T(c[j] + mu);
            if (!std::isfinite(q[j])) {
              // inf or NaN in the column (the shift may have turned inf into NaN): the plain
              // mean, and PyTorch's NaN variance.
              double sum = 0;
              for (int64_t k = 0; k < n; ++k) sum += double(base[k * inner + j]);
              vp[r * inner + j0 + j] = T(NAN);
              mp[r * inner + j0 + j] = T(sum / double(n));
            }
          }
        } else {
          for (int64_t k = 0; k < n; ++k) {
            const T* p = base + k * inner;
            for (int64_t j = 0; j < bl; ++j) s[j] += double(p[j]);
          }
          for (int64_t j = 0; j < bl; ++j) s[j] /= double(n);
          for (int64_t k = 0; k < n; ++k) {
            const T* p = base + k * inner;
            for (int64_t j = 0; j < bl; ++j) {
              const double d = double(p[j]) - s[j];
              q[j] += d * d;
            }
          }
          for (int64_t j = 0; j < bl; ++j) {
            vp[r * inner + j0 + j] = T(root(q[j] / dof));
            mp[r * inner + j0 + j] = T(s[j]);
          }
        }
      }
    });
  });
}

}  // namespace

// Entry point for the dispatcher's native fast path (common/fast_reduce.cpp).
void run_reduce_kernel(int code, py::handle out, py::handle in, int64_t num_reduced) {
  reduce_impl(code, out, in, num_reduced, 2.0);
}

void bind_reduce(py::module_& m) {
  py::dict codes;
  const char* names[] = {"sum",     "nansum", "prod",  "max",     "min",    "any",   "all",
                         "count_nonzero", "abs_sum", "sum_sq", "pow_sum", "abs_max", "abs_min"};
  for (int i = 0; i < 13; ++i) codes[names[i]] = i;
  m.attr("reduce_ops") = codes;
  m.def("reduce", &reduce_impl, py::arg("code"), py::arg("out"), py::arg("input"), py::arg("num_reduced"),
        py::arg("p") = 2.0, "out = reduction of input over its last num_reduced dims.");
  m.def("arg_reduce", &arg_reduce_impl, py::arg("is_max"), py::arg("values"), py::arg("indices"), py::arg("input"),
        py::arg("num_reduced"), "values/indices of the max (or min) over the last num_reduced dims.");
  m.def("scan", &scan_impl, py::arg("code"), py::arg("out"), py::arg("input"),
        "Inclusive scan (0 cumsum, 1 cumprod) along the last dim.");
  m.def("scan_indexed", &scan_indexed_impl, py::arg("is_max"), py::arg("values"), py::arg("indices"),
        py::arg("input"), "cummax (or cummin) values and indices along the last dim.");
  m.def("var_mean", &var_mean_impl, py::arg("var"), py::arg("mean"), py::arg("input"), py::arg("outer"), py::arg("n"),
        py::arg("inner"), py::arg("correction"), py::arg("take_sqrt") = false,
        "var (or std, take_sqrt) and mean over n of a contiguous (outer, n, inner) block (double accumulators).");
  m.def("softmax", &softmax_impl, py::arg("out"), py::arg("input"), py::arg("outer"), py::arg("n"), py::arg("inner"),
        py::arg("log"), "softmax (or log_softmax) over n of a contiguous (outer, n, inner) block.");
}

}  // namespace ember
