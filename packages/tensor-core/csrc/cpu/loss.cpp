// Kernel family "loss": the fused log_softmax + nll pass of cross_entropy (and nll_loss on
// log-probabilities), and the embedding row gather and its dense backward. Inputs are
// contiguous; class scores are rows of C. Targets and indices are int64 and validated here.
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
#include "../common/tensor_arg.h"
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

// Per row r of x (R, C): nll[r] = -w[t] * logp[t], smooth[r] = -sum_c w[c] * logp[c] and
// wt[r] = w[t], all 0 where t == ignore_index. logp is x itself when `log_probs`, else
// log_softmax(x) computed on the fly (max + log-sum-exp, never materialized).
void class_nll_impl(py::handle nll_obj, py::handle smooth_obj, py::handle wt_obj, py::handle x_obj,
                    py::handle target_obj, py::handle weight_obj, int64_t ignore_index, bool log_probs) {
  TensorArg x = unpack(x_obj), target = unpack(target_obj);
  if (!x.is_contiguous() || x.ndim() != 2) throw std::invalid_argument("class_nll: input must be contiguous 2-d");
  int64_t rows = x.shape[0], c = x.shape[1];
  if (target.dtype != DType::Int64 || !target.is_contiguous() || target.numel() != rows)
    throw std::invalid_argument("class_nll: target must be contiguous int64 with one entry per row");
  char* nll = contiguous_of(nll_obj, x.dtype, rows, "class_nll nll").data;
  char* wt = contiguous_of(wt_obj, x.dtype, rows, "class_nll wt").data;
  char* smooth = smooth_obj.is_none() ? nullptr : contiguous_of(smooth_obj, x.dtype, rows, "class_nll smooth").data;
  char* weight = weight_obj.is_none() ? nullptr : contiguous_of(weight_obj, x.dtype, c, "class_nll weight").data;
  const int64_t* tp = reinterpret_cast<const int64_t*>(target.data);
  // Validate first so no partial result is written and no thread throws.
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = tp[r];
    if (t != ignore_index && (t < 0 || t >= c)) throw std::out_of_range("Target " + std::to_string(t) + " is out of bounds.");
  }
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "class_nll", [&] {
    using T = scalar_t;
    const T *xp = reinterpret_cast<const T*>(x.data), *wp = reinterpret_cast<const T*>(weight);
    T *np = reinterpret_cast<T*>(nll), *sp = reinterpret_cast<T*>(smooth), *tw = reinterpret_cast<T*>(wt);
    parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = xp + r * c;
        int64_t t = tp[r];
        if (t == ignore_index) {
          np[r] = T(0);
          tw[r] = T(0);
          if (sp) sp[r] = T(0);
          continue;
        }
        T lse = 0;
        if (!log_probs) {
          T mx = minmax_contig<T, true>(row, c);
          T s = exp_sum<T>(nullptr, row, c, mx);
          lse = std::isinf(mx) ? mx : mx + std::log(s);
        }
        T w = wp ? wp[t] : T(1);
        np[r] = -w * (row[t] - lse);
        tw[r] = w;
        if (sp) {
          T s = 0;
          T wsum = 0;
          if (wp) {
            for (int64_t i = 0; i < c; ++i) {
              s += wp[i] * row[i];
              wsum += wp[i];
            }
          } else {
            for (int64_t i = 0; i < c; ++i) s += row[i];
            wsum = T(c);
          }
          sp[r] = -(s - wsum * lse);
        }
      }
    });
  });
}

// The gradient of class_nll with respect to x (R, C), one pass per row (the softmax is
// recomputed from x in the row's cache-resident output instead of being saved):
//   dx[r, i] = p[r, i] * (a[r] + s[r] * sum(w)) - s[r] * w[i] - (i == t[r]) * a[r]
// with a = g_nll * w[t], s = g_smooth (0 without smoothing), p = softmax(x) (0 for
// log-probability inputs); rows whose target is ignore_index get 0.
void class_nll_backward_impl(py::handle dx_obj, py::handle gnll_obj, py::handle gsmooth_obj, py::handle x_obj,
                             py::handle target_obj, py::handle weight_obj, int64_t ignore_index, bool log_probs) {
  TensorArg x = unpack(x_obj), target = unpack(target_obj);
  if (!x.is_contiguous() || x.ndim() != 2)
    throw std::invalid_argument("class_nll_backward: input must be contiguous 2-d");
  int64_t rows = x.shape[0], c = x.shape[1];
  if (target.dtype != DType::Int64 || !target.is_contiguous() || target.numel() != rows)
    throw std::invalid_argument("class_nll_backward: target must be contiguous int64 with one entry per row");
  char* dx = contiguous_of(dx_obj, x.dtype, rows * c, "class_nll_backward grad_input").data;
  char* gnll = gnll_obj.is_none() ? nullptr : contiguous_of(gnll_obj, x.dtype, rows, "class_nll_backward grad").data;
  char* gsm = gsmooth_obj.is_none() ? nullptr : contiguous_of(gsmooth_obj, x.dtype, rows, "class_nll_backward grad").data;
  char* weight = weight_obj.is_none() ? nullptr : contiguous_of(weight_obj, x.dtype, c, "class_nll_backward weight").data;
  const int64_t* tp = reinterpret_cast<const int64_t*>(target.data);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = tp[r];
    if (t != ignore_index && (t < 0 || t >= c)) throw std::out_of_range("Target " + std::to_string(t) + " is out of bounds.");
  }
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "class_nll_backward", [&] {
    using T = scalar_t;
    const T *xp = reinterpret_cast<const T*>(x.data), *wp = reinterpret_cast<const T*>(weight);
    const T *gn = reinterpret_cast<const T*>(gnll), *gs = reinterpret_cast<const T*>(gsm);
    T* out = reinterpret_cast<T*>(dx);
    T wsum = T(c);
    if (wp) {
      wsum = 0;
      for (int64_t i = 0; i < c; ++i) wsum += wp[i];
    }
    parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(c, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = xp + r * c;
        T* o = out + r * c;
        const int64_t t = tp[r];
        if (t == ignore_index) {
          std::fill(o, o + c, T(0));
          continue;
        }
        const T a = gn ? gn[r] * (wp ? wp[t] : T(1)) : T(0);
        const T s = gs ? gs[r] : T(0);
        if (log_probs) {
          std::fill(o, o + c, T(0));
        } else {
          const T mx = minmax_contig<T, true>(row, c);
          const T total = exp_sum<T>(o, row, c, mx);
          const T scale = (a + s * wsum) / total;
          for (int64_t i = 0; i < c; ++i) o[i] *= scale;
        }
        if (gs) {
          if (wp) {
            for (int64_t i = 0; i < c; ++i) o[i] -= s * wp[i];
          } else {
            for (int64_t i = 0; i < c; ++i) o[i] -= s;
          }
        }
        o[t] -= a;
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
  m.def("class_nll", &class_nll_impl, py::arg("nll"), py::arg("smooth"), py::arg("wt"), py::arg("input"),
        py::arg("target"), py::arg("weight"), py::arg("ignore_index"), py::arg("log_probs"),
        "Per-row weighted negative log-likelihood (and label-smoothing term) of class scores.");
  m.def("class_nll_backward", &class_nll_backward_impl, py::arg("grad_input"), py::arg("grad_nll"),
        py::arg("grad_smooth"), py::arg("input"), py::arg("target"), py::arg("weight"), py::arg("ignore_index"),
        py::arg("log_probs"), "Gradient of class_nll with respect to its input, one pass per row.");
  m.def("embedding", &embedding_impl, py::arg("out"), py::arg("weight"), py::arg("indices"));
  m.def("embedding_backward", &embedding_backward_impl, py::arg("grad_weight"), py::arg("grad"),
        py::arg("indices"), py::arg("padding_idx"));
}

}  // namespace ember
