// Kernel family "pool": max/avg pooling over the last two dims of contiguous (P, H, W) planes
// (1-d pooling is H == 1), adaptive pooling, and the backward kernels. float32/float64; the
// Python caller converts float16/bfloat16 and computes output sizes (ceil_mode, padding).
#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"

namespace py = pybind11;

namespace ember {

namespace {

struct Pool {
  int64_t planes, H, W, oH, oW;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool count_include_pad;
  int64_t divisor;  // 0: none
};

template <typename T>
inline bool takes(T v, T m) {
  if constexpr (std::is_floating_point_v<T>)
    return v > m || std::isnan(v);  // NaN wins, as in PyTorch
  else
    return v > m;
}

// The identity of max: -inf for floats, the lowest value for integers.
template <typename T>
constexpr T lowest_value() {
  if constexpr (std::is_floating_point_v<T>)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::lowest();
}

int64_t plane_grain(const Pool& p) { return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, p.H * p.W)); }

// Max pooling without indices: each output row is the max over kh input rows (vectorized
// along W), then a max over kw taps of that row.
template <typename T>
void max_pool_values(T* out, const T* in, const Pool& p) {
  parallel_for(p.planes, plane_grain(p), [&](int64_t b, int64_t e) {
    std::vector<T> rowmax(static_cast<size_t>(p.W));
    const T lowest = lowest_value<T>();
    for (int64_t pl = b; pl < e; ++pl) {
      const T* x = in + pl * p.H * p.W;
      T* y = out + pl * p.oH * p.oW;
      for (int64_t oh = 0; oh < p.oH; ++oh, y += p.oW) {
        T* rm = rowmax.data();
        std::fill(rm, rm + p.W, lowest);
        for (int64_t i = 0; i < p.kh; ++i) {
          int64_t h = oh * p.sh - p.ph + i * p.dh;
          if (h < 0 || h >= p.H) continue;
          const T* row = x + h * p.W;
          for (int64_t w = 0; w < p.W; ++w) rm[w] = takes(row[w], rm[w]) ? row[w] : rm[w];
        }
        for (int64_t ow = 0; ow < p.oW; ++ow) {
          T m = lowest;
          int64_t w0 = ow * p.sw - p.pw;
          for (int64_t j = 0; j < p.kw; ++j) {
            int64_t w = w0 + j * p.dw;
            if (w >= 0 && w < p.W && takes(rm[w], m)) m = rm[w];
          }
          y[ow] = m;
        }
      }
    }
  });
}

// Max pooling with indices (flat h * W + w within the plane, as PyTorch).
template <typename T>
void max_pool_indices(T* out, int64_t* idx, const T* in, const Pool& p) {
  parallel_for(p.planes, plane_grain(p), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* x = in + pl * p.H * p.W;
      T* y = out + pl * p.oH * p.oW;
      int64_t* ix = idx + pl * p.oH * p.oW;
      for (int64_t oh = 0; oh < p.oH; ++oh) {
        int64_t h0 = oh * p.sh - p.ph;
        while (h0 < 0) h0 += p.dh;
        int64_t h1 = std::min(oh * p.sh - p.ph + (p.kh - 1) * p.dh + 1, p.H);
        for (int64_t ow = 0; ow < p.oW; ++ow) {
          int64_t w0 = ow * p.sw - p.pw;
          while (w0 < 0) w0 += p.dw;
          int64_t w1 = std::min(ow * p.sw - p.pw + (p.kw - 1) * p.dw + 1, p.W);
          T m = lowest_value<T>();
          int64_t mi = h0 * p.W + w0;
          for (int64_t h = h0; h < h1; h += p.dh)
            for (int64_t w = w0; w < w1; w += p.dw) {
              T v = x[h * p.W + w];
              if (takes(v, m)) {
                m = v;
                mi = h * p.W + w;
              }
            }
          y[oh * p.oW + ow] = m;
          ix[oh * p.oW + ow] = mi;
        }
      }
    }
  });
}

// The window of output (oh, ow) for average pooling, and its divisor (0: empty window).
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};

inline AvgWindow avg_window(const Pool& p, int64_t oh, int64_t ow) {
  AvgWindow a;
  a.h0 = oh * p.sh - p.ph;
  a.w0 = ow * p.sw - p.pw;
  a.h1 = std::min(a.h0 + p.kh, p.H + p.ph);
  a.w1 = std::min(a.w0 + p.kw, p.W + p.pw);
  int64_t pool_size = (a.h1 - a.h0) * (a.w1 - a.w0);
  a.h0 = std::max<int64_t>(a.h0, 0);
  a.w0 = std::max<int64_t>(a.w0, 0);
  a.h1 = std::min(a.h1, p.H);
  a.w1 = std::min(a.w1, p.W);
  if (a.h0 >= a.h1 || a.w0 >= a.w1) {
    a.divisor = 0;
  } else {
    a.divisor = p.divisor ? p.divisor : p.count_include_pad ? pool_size : (a.h1 - a.h0) * (a.w1 - a.w0);
  }
  return a;
}

template <typename T>
void avg_pool(T* out, const T* in, const Pool& p) {
  parallel_for(p.planes, plane_grain(p), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* x = in + pl * p.H * p.W;
      T* y = out + pl * p.oH * p.oW;
      for (int64_t oh = 0; oh < p.oH; ++oh)
        for (int64_t ow = 0; ow < p.oW; ++ow) {
          AvgWindow a = avg_window(p, oh, ow);
          T s = 0;
          if (a.divisor)
            for (int64_t h = a.h0; h < a.h1; ++h)
              for (int64_t w = a.w0; w < a.w1; ++w) s += x[h * p.W + w];
          y[oh * p.oW + ow] = a.divisor ? s / static_cast<T>(a.divisor) : T(0);
        }
    }
  });
}

template <typename T>
void avg_pool_backward(T* gin, const T* gout, const Pool& p) {
  parallel_for(p.planes, plane_grain(p), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      T* x = gin + pl * p.H * p.W;
      const T* y = gout + pl * p.oH * p.oW;
      std::fill(x, x + p.H * p.W, T(0));
      for (int64_t oh = 0; oh < p.oH; ++oh)
        for (int64_t ow = 0; ow < p.oW; ++ow) {
          AvgWindow a = avg_window(p, oh, ow);
          if (!a.divisor) continue;
          T g = y[oh * p.oW + ow] / static_cast<T>(a.divisor);
          for (int64_t h = a.h0; h < a.h1; ++h)
            for (int64_t w = a.w0; w < a.w1; ++w) x[h * p.W + w] += g;
        }
    }
  });
}

// grad_in[plane][idx] += grad_out: max pooling's (and adaptive max pooling's) backward.
template <typename T>
void scatter_backward(T* gin, const T* gout, const int64_t* idx, const Pool& p) {
  std::atomic<bool> bad{false};
  const int64_t hw = p.H * p.W, ohw = p.oH * p.oW;
  parallel_for(p.planes, plane_grain(p), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      T* x = gin + pl * hw;
      std::fill(x, x + hw, T(0));
      for (int64_t o = 0; o < ohw; ++o) {
        int64_t i = idx[pl * ohw + o];
        if (i < 0 || i >= hw) {
          bad = true;
          continue;
        }
        x[i] += gout[pl * ohw + o];
      }
    }
  });
  if (bad) throw std::runtime_error("max_pool backward: found an invalid max index");
}

// Adaptive windows: [floor(o*I/O), ceil((o+1)*I/O)).
inline int64_t astart(int64_t o, int64_t osz, int64_t isz) { return (o * isz) / osz; }
inline int64_t aend(int64_t o, int64_t osz, int64_t isz) { return ((o + 1) * isz + osz - 1) / osz; }

template <typename T>
void adaptive_pool(T* out, int64_t* idx, const T* in, const Pool& p, bool is_max) {
  parallel_for(p.planes, plane_grain(p), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* x = in + pl * p.H * p.W;
      for (int64_t oh = 0; oh < p.oH; ++oh) {
        int64_t h0 = astart(oh, p.oH, p.H), h1 = aend(oh, p.oH, p.H);
        for (int64_t ow = 0; ow < p.oW; ++ow) {
          int64_t w0 = astart(ow, p.oW, p.W), w1 = aend(ow, p.oW, p.W);
          int64_t o = pl * p.oH * p.oW + oh * p.oW + ow;
          if (is_max) {
            T m = -std::numeric_limits<T>::infinity();
            int64_t mi = h0 * p.W + w0;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w)
                if (takes(x[h * p.W + w], m)) {
                  m = x[h * p.W + w];
                  mi = h * p.W + w;
                }
            out[o] = m;
            if (idx) idx[o] = mi;
          } else {
            T s = 0;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) s += x[h * p.W + w];
            out[o] = s / static_cast<T>((h1 - h0) * (w1 - w0));
          }
        }
      }
    }
  });
}

template <typename T>
void adaptive_avg_backward(T* gin, const T* gout, const Pool& p) {
  parallel_for(p.planes, plane_grain(p), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      T* x = gin + pl * p.H * p.W;
      std::fill(x, x + p.H * p.W, T(0));
      for (int64_t oh = 0; oh < p.oH; ++oh) {
        int64_t h0 = astart(oh, p.oH, p.H), h1 = aend(oh, p.oH, p.H);
        for (int64_t ow = 0; ow < p.oW; ++ow) {
          int64_t w0 = astart(ow, p.oW, p.W), w1 = aend(ow, p.oW, p.W);
          T g = gout[pl * p.oH * p.oW + oh * p.oW + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) x[h * p.W + w] += g;
        }
      }
    }
  });
}

// -- argument plumbing ------------------------------------------------------------------

void need(bool ok, const char* msg) {
  if (!ok) throw std::runtime_error(msg);
}

// in (P, H, W) and out (P, oH, oW), both contiguous float32/float64 of one dtype.
Pool make_pool(const TensorArg& in, const TensorArg& out, py::handle params) {
  need(in.ndim() == 3 && out.ndim() == 3 && in.shape[0] == out.shape[0], "pool kernel: bad shapes");
  need(in.dtype == out.dtype, "pool kernel: dtypes differ");
  need(in.is_contiguous() && out.is_contiguous(), "pool kernel expects contiguous tensors");
  Pool p{};
  p.planes = in.shape[0];
  p.H = in.shape[1];
  p.W = in.shape[2];
  p.oH = out.shape[1];
  p.oW = out.shape[2];
  auto v = to_int64_vector(params, "pool params");  // kh kw sh sw ph pw dh dw count_include_pad divisor
  need(v.size() == 10, "pool kernel: expected 10 parameters");
  p.kh = v[0], p.kw = v[1], p.sh = v[2], p.sw = v[3], p.ph = v[4], p.pw = v[5], p.dh = v[6], p.dw = v[7];
  p.count_include_pad = v[8] != 0;
  p.divisor = v[9];
  need(p.kh >= 1 && p.kw >= 1 && p.sh >= 1 && p.sw >= 1 && p.ph >= 0 && p.pw >= 0 && p.dh >= 1 && p.dw >= 1,
       "pool kernel: bad geometry");
  need((p.H > 0 && p.W > 0) || p.oH * p.oW * p.planes == 0, "pool kernel: empty input");
  return p;
}

int64_t* index_ptr(py::handle indices, const TensorArg& out) {
  if (indices.is_none()) return nullptr;
  TensorArg i = unpack(indices);
  need(i.dtype == DType::Int64 && i.shape == out.shape && i.is_contiguous(), "pool kernel: bad indices");
  return reinterpret_cast<int64_t*>(i.data);
}

// mode: 0 max, 1 avg, 2 adaptive max, 3 adaptive avg.
template <typename T>
void max_pool_any(const TensorArg& O, const TensorArg& I, int64_t* idx, const Pool& p) {
  T* y = reinterpret_cast<T*>(O.data);
  const T* x = reinterpret_cast<const T*>(I.data);
  if (idx) max_pool_indices<T>(y, idx, x, p);
  else max_pool_values<T>(y, x, p);
}

bool is_float(DType d) { return d == DType::Float32 || d == DType::Float64; }

void pool_forward_impl(py::handle out, py::handle indices, py::handle in, py::handle params, int mode) {
  TensorArg I = unpack(in), O = unpack(out);
  Pool p = make_pool(I, O, params);
  int64_t* idx = index_ptr(indices, O);
  if (!is_float(I.dtype)) {  // integer max pooling (PyTorch allows it); nothing else
    need(mode == 0, "pool kernel: float32/float64 only");
    py::gil_scoped_release release;
    EMBER_DISPATCH_INTEGRAL(I.dtype, "pool kernel", [&] { max_pool_any<scalar_t>(O, I, idx, p); });
    return;
  }
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(I.dtype, "pool kernel", [&] {
    using T = scalar_t;
    T* y = reinterpret_cast<T*>(O.data);
    const T* x = reinterpret_cast<const T*>(I.data);
    if (mode == 0 && idx) max_pool_indices<T>(y, idx, x, p);
    else if (mode == 0) max_pool_values<T>(y, x, p);
    else if (mode == 1) avg_pool<T>(y, x, p);
    else adaptive_pool<T>(y, idx, x, p, mode == 2);
  });
}

// grad_in (P, H, W) from grad_out (P, oH, oW); indices for the max modes.
void pool_backward_impl(py::handle grad_in, py::handle grad_out, py::handle indices, py::handle params, int mode) {
  TensorArg I = unpack(grad_in), O = unpack(grad_out);
  Pool p = make_pool(I, O, params);
  int64_t* idx = index_ptr(indices, O);
  need(idx != nullptr || mode == 1 || mode == 3, "pool backward: indices required");
  need(is_float(I.dtype), "pool backward: float32/float64 only");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(I.dtype, "pool kernel", [&] {
    using T = scalar_t;
    T* x = reinterpret_cast<T*>(I.data);
    const T* y = reinterpret_cast<const T*>(O.data);
    if (mode == 1) avg_pool_backward<T>(x, y, p);
    else if (mode == 3) adaptive_avg_backward<T>(x, y, p);
    else scatter_backward<T>(x, y, idx, p);
  });
}


}  // namespace

void bind_pool(py::module_& m) {
  m.def("pool_forward", &pool_forward_impl, py::arg("out"), py::arg("indices"), py::arg("input"), py::arg("params"),
        py::arg("mode"),
        "Pools (P,H,W) planes into out (P,oH,oW); mode 0 max, 1 avg, 2 adaptive max, 3 adaptive avg. params: "
        "kh kw sh sw ph pw dh dw count_include_pad divisor_override.");
  m.def("pool_backward", &pool_backward_impl, py::arg("grad_input"), py::arg("grad_output"), py::arg("indices"),
        py::arg("params"), py::arg("mode"), "The input gradient of pool_forward (max modes scatter by indices).");
}

}  // namespace ember
