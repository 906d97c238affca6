// Kernel family "softmax_backward": the input gradients of softmax and log_softmax from the saved
// output y and the output gradient g, along the middle dim of a contiguous (outer, n, inner) block:
//
//   softmax:      gx = y * (g - sum_n(g * y))
//   log_softmax:  gx = g - exp(y) * sum_n(g)
//
// one read pass for the row sums and one read-and-write pass, where the composite ran four ops
// (a product, a reduction, a broadcast product and a difference); a large output of a dim that
// is not the last one is written with streaming stores. When the dim is not the last
// one (inner > 1) the sums are kept per column and both passes walk whole contiguous rows of
// the slab, so every load is a full vector (never a strided column walk).
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/stream_store.h"
#include "../common/tensor_arg.h"
#include "../common/vecmath.h"

namespace py = pybind11;

namespace ember {

namespace {

template <typename T>
inline T exp_of(T v) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(v);
  else return std::exp(v);
}

// One output run of the gradient, o = y * (g - s) (softmax) or g - exp(y) * s (log_softmax), with
// s a vector of the run's column sums or (s_vector false) one row sum; float32 in whole vectors
// (the exp too), written with streaming stores when `stream` (stream_store.h).
template <typename T>
void grad_row_out(T* o, const T* g, const T* y, const T* s, int64_t n, bool s_vector, bool log, bool stream) {
  auto one = [&](int64_t i) {
    const T sv = s[s_vector ? i : 0];
    o[i] = log ? g[i] - exp_of(y[i]) * sv : y[i] * (g[i] - sv);
  };
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (const int64_t head = stream_head(o, n, stream); i < head; ++i) one(i);
    for (; i + kVecFloats <= n; i += kVecFloats) {
      VecF gv, yv, sv;
      std::memcpy(&gv, g + i, sizeof(VecF));
      std::memcpy(&yv, y + i, sizeof(VecF));
      if (s_vector) std::memcpy(&sv, s + i, sizeof(VecF));
      else sv = VecF{} + s[0];
      const VecF r = log ? gv - exp_vec(yv) * sv : yv * (gv - sv);
      store_vec(o + i, r, stream);
    }
  }
  for (; i < n; ++i) one(i);
}

// sum(g * y) (or sum(g) with y null) over a contiguous run: float32 in four vector accumulators
// (a scalar loop may not be reassociated, and one serial add chain runs at a quarter speed).
template <typename T>
T row_dot(const T* g, const T* y, int64_t n) {
  int64_t i = 0;
  T acc = T(0);
  if constexpr (std::is_same_v<T, float>) {
    VecF a[4] = {VecF{}, VecF{}, VecF{}, VecF{}};
    for (; i + 4 * kVecFloats <= n; i += 4 * kVecFloats)
      for (int u = 0; u < 4; ++u) {
        VecF gv, yv;
        std::memcpy(&gv, g + i + u * kVecFloats, sizeof(VecF));
        if (y) {
          std::memcpy(&yv, y + i + u * kVecFloats, sizeof(VecF));
          a[u] += gv * yv;
        } else {
          a[u] += gv;
        }
      }
    const VecF t = (a[0] + a[1]) + (a[2] + a[3]);
    for (int l = 0; l < kVecFloats; ++l) acc += t[l];
  }
  for (; i < n; ++i) acc += y ? g[i] * y[i] : g[i];
  return acc;
}

template <typename T>
void rows_last(T* o, const T* g, const T* y, int64_t outer, int64_t n, bool log) {
  parallel_for(outer, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* gr = g + r * n;
      const T* yr = y + r * n;
      T* orow = o + r * n;
      const T acc = row_dot<T>(gr, log ? nullptr : yr, n);
      // (Plain stores: streaming this row pass's output measured no faster, one thread.)
      grad_row_out<T>(orow, gr, yr, &acc, n, false, log, false);
    }
  });
}

template <typename T>
void rows_inner(T* o, const T* g, const T* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  const bool stream = stream_output(outer * n * inner * static_cast<int64_t>(sizeof(T))) && stream_clear_of(o, g) &&
                      stream_clear_of(o, y);
  // One task per (outer index, column block); column sums in a block-sized buffer.
  const int64_t width = std::min<int64_t>(inner, 1024);
  const int64_t nblk = (inner + width - 1) / width;
  parallel_for(outer * nblk, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n * width, 1)),
               [&](int64_t b0, int64_t b1) {
    std::vector<T> acc(static_cast<size_t>(width));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r = b / nblk, j0 = (b % nblk) * width, bl = std::min(width, inner - j0);
      const T* gs = g + r * n * inner + j0;
      const T* ys = y + r * n * inner + j0;
      T* os = o + r * n * inner + j0;
      T* a = acc.data();
      std::fill(a, a + bl, T(0));
      for (int64_t k = 0; k < n; ++k) {
        const T* gk = gs + k * inner;
        const T* yk = ys + k * inner;
        if (log)
          for (int64_t j = 0; j < bl; ++j) a[j] += gk[j];
        else
          for (int64_t j = 0; j < bl; ++j) a[j] += gk[j] * yk[j];
      }
      for (int64_t k = 0; k < n; ++k) {
        const T* gk = gs + k * inner;
        const T* yk = ys + k * inner;
        T* ok = os + k * inner;
        grad_row_out<T>(ok, gk, yk, a, bl, true, log, stream);
      }
    }
    stream_fence(stream);
  });
}

void softmax_backward_impl(py::handle out_obj, py::handle grad_obj, py::handle output_obj, int64_t outer, int64_t n,
                           int64_t inner, bool log) {
  TensorArg out = unpack(out_obj), g = unpack(grad_obj), y = unpack(output_obj);
  if (out.dtype != y.dtype || g.dtype != y.dtype || !out.is_contiguous() || !g.is_contiguous() ||
      !y.is_contiguous() || out.shape != y.shape || g.shape != y.shape)
    throw std::invalid_argument("softmax_backward: expected contiguous operands of one dtype and shape");
  int64_t total = 0;
  if (outer < 0 || n < 0 || inner < 0 || __builtin_mul_overflow(outer, n, &total) ||
      __builtin_mul_overflow(total, inner, &total) || total != y.numel())
    throw std::invalid_argument("softmax_backward: bad (outer, n, inner) split");
  if (total == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(y.dtype, "softmax_backward", [&] {
    using T = scalar_t;
    T* o = reinterpret_cast<T*>(out.data);
    const T* gp = reinterpret_cast<const T*>(g.data);
    const T* yp = reinterpret_cast<const T*>(y.data);
    if (inner == 1) rows_last<T>(o, gp, yp, outer, n, log);
    else rows_inner<T>(o, gp, yp, outer, n, inner, log);
  });
}

}  // namespace

void bind_softmax_backward(py::module_& m) {
  m.def("softmax_backward", &softmax_backward_impl, py::arg("out"), py::arg("grad"), py::arg("output"),
        py::arg("outer"), py::arg("n"), py::arg("inner"), py::arg("log"),
        "The input gradient of softmax (log: log_softmax) along the middle dim of (outer, n, inner).");
}

}  // namespace ember
