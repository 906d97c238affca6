// Kernel family "attention": fused scaled dot-product attention. Each task is one block of
// query rows of one (batch, head): scores = scale * Q K^T by BLAS gemm into a small buffer, the
// additive mask / causal cut, a row softmax, then scores @ V by gemm. Tasks run on OpenMP
// threads with OpenBLAS held to one thread inside (build-facts). With is_causal a block only
// multiplies the keys it can see, which halves the work.
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
void gemm(bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T* c, int ldc) {
  CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, alpha, a, lda, b, ldb, T(0), c, ldc);
  else
    scipy_cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, alpha, a, lda, b, ldb, T(0), c, ldc);
}

void check_4d(const TensorArg& t, DType dtype, const char* what) {
  if (t.ndim() != 4 || !t.is_contiguous() || t.dtype != dtype)
    throw std::invalid_argument(std::string("sdpa: ") + what + " must be contiguous 4-d in the query's dtype");
}

// out (B, H, L, Ev) = softmax(scale * q k^T + mask) v for q (B, H, L, E), k (B, Hk, S, E),
// v (B, Hk, S, Ev); head h reads key/value head h / (H / Hk). mask (None or broadcastable
// to (B, H, L, S), same dtype) is added to the scores. Fully masked rows give zeros.
void sdpa_impl(py::handle out_obj, py::handle q_obj, py::handle k_obj, py::handle v_obj, py::handle mask_obj,
               bool is_causal, double scale) {
  TensorArg q = unpack(q_obj), k = unpack(k_obj), v = unpack(v_obj), out = unpack(out_obj);
  check_4d(q, q.dtype, "query");
  check_4d(k, q.dtype, "key");
  check_4d(v, q.dtype, "value");
  check_4d(out, q.dtype, "out");
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
    const T *qp = reinterpret_cast<const T*>(q.data), *kp = reinterpret_cast<const T*>(k.data);
    const T *vp = reinterpret_cast<const T*>(v.data), *mp = reinterpret_cast<const T*>(mask.data);
    T* op = reinterpret_cast<T*>(out.data);
    BlasSingleThread blas_guard(get_num_threads() > 1 && tasks > 1);
    parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
      std::vector<T> scores(static_cast<size_t>(kQueryBlock * std::max<int64_t>(S, 1)));
      for (int64_t task = t0; task < t1; ++task) {
        int64_t bh = task / qblocks, qb = task % qblocks;
        int64_t b = bh / H, h = bh % H, hk = h / group;
        int64_t i0 = qb * kQueryBlock, i1 = std::min(L, i0 + kQueryBlock), m = i1 - i0;
        int64_t keys = is_causal ? std::min(S, i1) : S;  // key j is visible to query i when j <= i
        const T* qm = qp + ((b * H + h) * L + i0) * E;
        const T* km = kp + (b * Hk + hk) * S * E;
        const T* vm = vp + (b * Hk + hk) * S * Ev;
        T* om = op + ((b * H + h) * L + i0) * Ev;
        if (keys == 0) {
          std::fill(om, om + m * Ev, T(0));
          continue;
        }
        if (E > 0) {
          gemm<T>(true, int(m), int(keys), int(E), T(scale), qm, int(E), km, int(E), scores.data(), int(keys));
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
        gemm<T>(false, int(m), int(Ev), int(keys), T(1), scores.data(), int(keys), vm, int(Ev), om, int(Ev));
        for (int64_t r = 0; r < m; ++r) {
          T* o = om + r * Ev;
          for (int64_t j = 0; j < Ev; ++j) o[j] *= inv_sum[r];
        }
      }
    });
  });
}

}  // namespace

void bind_attention(py::module_& m) {
  m.def("sdpa", &sdpa_impl, py::arg("out"), py::arg("query"), py::arg("key"), py::arg("value"), py::arg("mask"),
        py::arg("is_causal"), py::arg("scale"),
        "Fused softmax(scale * q k^T + mask) v over contiguous (B, H, L, E) operands.");
}

}  // namespace ember
