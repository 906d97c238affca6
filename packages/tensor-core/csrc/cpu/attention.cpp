// Kernel family "attention": fused scaled dot-product attention. Each task is one block of
// query rows of one (batch, head): scores = scale * Q K^T by BLAS gemm into a small buffer, the
// additive mask / causal cut, a row softmax, then scores @ V by gemm. Tasks run on OpenMP
// threads with OpenBLAS held to one thread inside (build-facts). With is_causal a block only
// multiplies the keys it can see, which halves the work.
//
// The backward (sdpa_backward) walks the same blocks: it rebuilds the block's probabilities P
// (never storing the L x S weights), then dP = G V^T, dS = P (dP - rowsum(P dP)) scale, and
// gQ = dS K, gK += dS^T Q, gV += P^T G: five gemms per block into cache-resident buffers instead
// of the composite's batched products, softmax and elementwise passes over (B, H, L, S) tensors.
// One task is one (batch, key head), so the gK/gV accumulations never race.
#include <cblas.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"
#include "reduce_simd.h"

namespace py = pybind11;

namespace ember {

namespace {

constexpr int64_t kQueryBlock = 64;

template <typename T>
void gemm_full(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
               T beta, T* c, int ldc) {
  CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    scipy_cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    scipy_cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void gemm(bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T* c, int ldc) {
  gemm_full<T>(false, trans_b, m, n, k, alpha, a, lda, b, ldb, T(0), c, ldc);
}

// A 4-d operand whose rows (last dim) are contiguous: (batch, head, row) strides in elements and
// the row stride as BLAS's leading dimension. Operands need not be contiguous: attention's q/k/v
// are usually head-split views of a projection (B, L, H, E) and run here without a copy.
struct Rows4 {
  char* data;
  int64_t sb, sh, sr;
  int ld;
};

Rows4 rows_4d(const TensorArg& t, DType dtype, const char* what) {
  bool ok = t.ndim() == 4 && t.dtype == dtype;
  int64_t width = ok ? std::max<int64_t>(t.shape[3], 1) : 1;
  int64_t ld = ok ? (t.shape[2] > 1 ? t.strides[2] : width) : 0;
  ok = ok && (t.shape[3] <= 1 || t.strides[3] == 1) && ld >= width && ld <= std::numeric_limits<int>::max();
  for (int i = 0; ok && i < 3; ++i) ok = t.strides[i] >= 0;
  if (!ok)
    throw std::invalid_argument(std::string("sdpa: ") + what +
                                " must be 4-d in the query's dtype with contiguous rows (last dim stride 1)");
  return {t.data, t.strides[0], t.strides[1], ld, static_cast<int>(ld)};
}

template <typename T>
T* rows_at(const Rows4& r, int64_t b, int64_t h, int64_t row) {
  return reinterpret_cast<T*>(r.data) + b * r.sb + h * r.sh + row * r.sr;
}

// Zeros every (b, h, row) of `r` (width elements each).
template <typename T>
void zero_rows(const Rows4& r, int64_t nb, int64_t nh, int64_t rows, int64_t width) {
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < rows; ++i) {
        T* p = rows_at<T>(r, b, h, i);
        std::fill(p, p + width, T(0));
      }
}

// out (B, H, L, Ev) = softmax(scale * q k^T + mask) v for q (B, H, L, E), k (B, Hk, S, E),
// v (B, Hk, S, Ev); head h reads key/value head h / (H / Hk). mask (None or broadcastable
// to (B, H, L, S), same dtype) is added to the scores. Fully masked rows give zeros.
void sdpa_impl(py::handle out_obj, py::handle q_obj, py::handle k_obj, py::handle v_obj, py::handle mask_obj,
               bool is_causal, double scale) {
  TensorArg q = unpack(q_obj), k = unpack(k_obj), v = unpack(v_obj), out = unpack(out_obj);
  Rows4 qr = rows_4d(q, q.dtype, "query"), kr = rows_4d(k, q.dtype, "key"), vr = rows_4d(v, q.dtype, "value");
  Rows4 outr = rows_4d(out, q.dtype, "out");
  int64_t B = q.shape[0], H = q.shape[1], L = q.shape[2], E = q.shape[3];
  int64_t Hk = k.shape[1], S = k.shape[2], Ev = v.shape[3];
  if (k.shape[0] != B || v.shape[0] != B || v.shape[1] != Hk || v.shape[2] != S || k.shape[3] != E ||
      Hk <= 0 || H % Hk != 0)
    throw std::invalid_argument("sdpa: query/key/value shapes do not match");
  if (out.shape != std::vector<int64_t>{B, H, L, Ev}) throw std::invalid_argument("sdpa: bad out shape");
  const int64_t limit = std::numeric_limits<int>::max();
  if (E > limit || S > limit || Ev > limit) throw std::invalid_argument("sdpa: dimensions too large for BLAS");
  TensorArg mask;
  std::vector<int64_t> ms;
  bool has_mask = !mask_obj.is_none();
  if (has_mask) {
    mask = unpack(mask_obj);
    if (mask.dtype != q.dtype) throw std::invalid_argument("sdpa: mask must have the query's dtype");
    ms = broadcast_strides(mask, {B, H, L, S});
  }
  int64_t group = H / Hk;
  int64_t qblocks = (L + kQueryBlock - 1) / kQueryBlock;
  int64_t tasks = B * H * qblocks;
  if (tasks == 0 || Ev == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(q.dtype, "scaled_dot_product_attention", [&] {
    using T = scalar_t;
    const T* mp = reinterpret_cast<const T*>(mask.data);
    BlasSingleThread blas_guard(get_num_threads() > 1 && tasks > 1);
    parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
      std::vector<T> scores(static_cast<size_t>(kQueryBlock * std::max<int64_t>(S, 1)));
      for (int64_t task = t0; task < t1; ++task) {
        int64_t bh = task / qblocks, qb = task % qblocks;
        int64_t b = bh / H, h = bh % H, hk = h / group;
        int64_t i0 = qb * kQueryBlock, i1 = std::min(L, i0 + kQueryBlock), m = i1 - i0;
        int64_t keys = is_causal ? std::min(S, i1) : S;  // key j is visible to query i when j <= i
        const T* qm = rows_at<T>(qr, b, h, i0);
        const T* km = rows_at<T>(kr, b, hk, 0);
        const T* vm = rows_at<T>(vr, b, hk, 0);
        T* om = rows_at<T>(outr, b, h, i0);
        if (keys == 0) {
          for (int64_t r = 0; r < m; ++r) std::fill(om + r * outr.sr, om + r * outr.sr + Ev, T(0));
          continue;
        }
        if (E > 0) {
          gemm<T>(true, int(m), int(keys), int(E), T(scale), qm, qr.ld, km, kr.ld, scores.data(), int(keys));
        } else {
          std::fill(scores.begin(), scores.begin() + m * keys, T(0));
        }
        std::vector<T> inv_sum(m);
        for (int64_t r = 0; r < m; ++r) {
          int64_t i = i0 + r;
          T* row = scores.data() + r * keys;
          int64_t visible = is_causal ? std::min(keys, i + 1) : keys;
          if (has_mask) {
            const T* mrow = mp + b * ms[0] + h * ms[1] + i * ms[2];
            for (int64_t j = 0; j < visible; ++j) row[j] += mrow[j * ms[3]];
          }
          T mx = visible ? minmax_contig<T, true>(row, visible) : -std::numeric_limits<T>::infinity();
          if (mx == -std::numeric_limits<T>::infinity()) {
            std::fill(row, row + keys, T(0));
            inv_sum[r] = T(0);
            continue;
          }
          T s = exp_sum<T>(row, row, visible, mx);
          std::fill(row + visible, row + keys, T(0));
          inv_sum[r] = T(1) / s;
        }
        gemm<T>(false, int(m), int(Ev), int(keys), T(1), scores.data(), int(keys), vm, vr.ld, om, outr.ld);
        for (int64_t r = 0; r < m; ++r) {
          T* o = om + r * outr.sr;
          for (int64_t j = 0; j < Ev; ++j) o[j] *= inv_sum[r];
        }
      }
    });
  });
}

// gQ, gK, gV of out = softmax(scale * q k^T + mask) v for (B, H, L, E) operands with contiguous rows
// (k, v with Hk heads, H a multiple of Hk). gK and gV are written whole (zeroed first). Rows that
// see no key (fully masked) have zero probabilities and so contribute nothing, as in the forward.
void sdpa_backward_impl(py::handle gq_obj, py::handle gk_obj, py::handle gv_obj, py::handle g_obj, py::handle q_obj,
                        py::handle k_obj, py::handle v_obj, py::handle mask_obj, bool is_causal, double scale) {
  TensorArg q = unpack(q_obj), k = unpack(k_obj), v = unpack(v_obj), g = unpack(g_obj);
  TensorArg gq = unpack(gq_obj), gk = unpack(gk_obj), gv = unpack(gv_obj);
  Rows4 qr = rows_4d(q, q.dtype, "query"), kr = rows_4d(k, q.dtype, "key"), vr = rows_4d(v, q.dtype, "value");
  Rows4 gr = rows_4d(g, q.dtype, "grad"), gqr = rows_4d(gq, q.dtype, "grad_query");
  Rows4 gkr = rows_4d(gk, q.dtype, "grad_key"), gvr = rows_4d(gv, q.dtype, "grad_value");
  int64_t B = q.shape[0], H = q.shape[1], L = q.shape[2], E = q.shape[3];
  int64_t Hk = k.shape[1], S = k.shape[2], Ev = v.shape[3];
  if (k.shape[0] != B || v.shape[0] != B || v.shape[1] != Hk || v.shape[2] != S || k.shape[3] != E ||
      Hk <= 0 || H % Hk != 0)
    throw std::invalid_argument("sdpa_backward: query/key/value shapes do not match");
  if (g.shape != std::vector<int64_t>{B, H, L, Ev} || gq.shape != q.shape || gk.shape != k.shape ||
      gv.shape != v.shape)
    throw std::invalid_argument("sdpa_backward: gradient shapes do not match");
  const int64_t limit = std::numeric_limits<int>::max();
  if (E > limit || S > limit || Ev > limit || L > limit)
    throw std::invalid_argument("sdpa_backward: dimensions too large for BLAS");
  TensorArg mask;
  std::vector<int64_t> ms;
  bool has_mask = !mask_obj.is_none();
  if (has_mask) {
    mask = unpack(mask_obj);
    if (mask.dtype != q.dtype) throw std::invalid_argument("sdpa_backward: mask must have the query's dtype");
    ms = broadcast_strides(mask, {B, H, L, S});
  }
  int64_t group = H / Hk;
  int64_t tasks = B * Hk;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(q.dtype, "scaled_dot_product_attention backward", [&] {
    using T = scalar_t;
    const T* mp = reinterpret_cast<const T*>(mask.data);
    zero_rows<T>(gkr, B, Hk, S, E);
    zero_rows<T>(gvr, B, Hk, S, Ev);
    zero_rows<T>(gqr, B, H, L, E);
    if (tasks == 0 || L == 0 || S == 0) return;
    BlasSingleThread blas_guard(get_num_threads() > 1 && tasks > 1);
    parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
      std::vector<T> probs(static_cast<size_t>(kQueryBlock * S)), dprobs(static_cast<size_t>(kQueryBlock * S));
      for (int64_t task = t0; task < t1; ++task) {
        int64_t b = task / Hk, hk = task % Hk;
        const T* km = rows_at<T>(kr, b, hk, 0);
        const T* vm = rows_at<T>(vr, b, hk, 0);
        T* gkm = rows_at<T>(gkr, b, hk, 0);
        T* gvm = rows_at<T>(gvr, b, hk, 0);
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
          for (int64_t i0 = 0; i0 < L; i0 += kQueryBlock) {
            int64_t i1 = std::min(L, i0 + kQueryBlock), m = i1 - i0;
            int64_t keys = is_causal ? std::min(S, i1) : S;
            if (keys == 0) continue;  // no query row of the block sees a key: all gradients zero
            const T* qm = rows_at<T>(qr, b, h, i0);
            const T* gm = rows_at<T>(gr, b, h, i0);
            T* gqm = rows_at<T>(gqr, b, h, i0);
            T* P = probs.data();
            T* dP = dprobs.data();
            int ik = int(keys);
            if (E > 0) {
              gemm<T>(true, int(m), ik, int(E), T(scale), qm, qr.ld, km, kr.ld, P, ik);
            } else {
              std::fill(P, P + m * keys, T(0));
            }
            for (int64_t r = 0; r < m; ++r) {
              int64_t i = i0 + r;
              T* row = P + r * keys;
              int64_t visible = is_causal ? std::min(keys, i + 1) : keys;
              if (has_mask) {
                const T* mrow = mp + b * ms[0] + h * ms[1] + i * ms[2];
                for (int64_t j = 0; j < visible; ++j) row[j] += mrow[j * ms[3]];
              }
              T mx = visible ? minmax_contig<T, true>(row, visible) : -std::numeric_limits<T>::infinity();
              if (mx == -std::numeric_limits<T>::infinity()) {
                std::fill(row, row + keys, T(0));
                continue;
              }
              T inv = T(1) / exp_sum<T>(row, row, visible, mx);
              for (int64_t j = 0; j < visible; ++j) row[j] *= inv;
              std::fill(row + visible, row + keys, T(0));
            }
            if (Ev > 0) {
              // dP = G V^T; gV += P^T G.
              gemm<T>(true, int(m), ik, int(Ev), T(1), gm, gr.ld, vm, vr.ld, dP, ik);
              gemm_full<T>(true, false, ik, int(Ev), int(m), T(1), P, ik, gm, gr.ld, T(1), gvm, gvr.ld);
            } else {
              std::fill(dP, dP + m * keys, T(0));
            }
            for (int64_t r = 0; r < m; ++r) {
              const T* pr = P + r * keys;
              T* dr = dP + r * keys;
              T delta = T(0);
              for (int64_t j = 0; j < keys; ++j) delta += pr[j] * dr[j];
              const T s = T(scale);
              for (int64_t j = 0; j < keys; ++j) dr[j] = pr[j] * (dr[j] - delta) * s;
            }
            if (E > 0) {
              // gQ = dS K; gK += dS^T Q.
              gemm<T>(false, int(m), int(E), ik, T(1), dP, ik, km, kr.ld, gqm, gqr.ld);
              gemm_full<T>(true, false, ik, int(E), int(m), T(1), dP, ik, qm, qr.ld, T(1), gkm, gkr.ld);
            }
          }
        }
      }
    });
  });
}

}  // namespace

void bind_attention(py::module_& m) {
  m.def("sdpa", &sdpa_impl, py::arg("out"), py::arg("query"), py::arg("key"), py::arg("value"), py::arg("mask"),
        py::arg("is_causal"), py::arg("scale"),
        "Fused softmax(scale * q k^T + mask) v over (B, H, L, E) operands with contiguous rows.");
  m.def("sdpa_backward", &sdpa_backward_impl, py::arg("grad_query"), py::arg("grad_key"), py::arg("grad_value"),
        py::arg("grad"), py::arg("query"), py::arg("key"), py::arg("value"), py::arg("mask"), py::arg("is_causal"),
        py::arg("scale"), "Gradients of sdpa for its query, key and value, probabilities rebuilt per block.");
}

}  // namespace ember
