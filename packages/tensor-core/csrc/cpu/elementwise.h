// Elementwise loop templates over the shared strided machinery (common/loop.h), with
// fast paths for contiguous operands and for a broadcast scalar operand.
#pragma once

#include "../common/loop.h"
#include "../common/tensor_arg.h"

namespace ember {

inline std::vector<int64_t> byte_strides(const std::vector<int64_t>& strides, int64_t item) {
  std::vector<int64_t> out(strides.size());
  for (size_t i = 0; i < strides.size(); ++i) out[i] = strides[i] * item;
  return out;
}

// out = f(a), a broadcast to out's shape. Types are the storage types. Contiguous runs go to
// run(Out* o, const In* x, n): a separately compiled loop for ops whose f is too big to be
// inlined and vectorized inside the generic loop below (exp, sigmoid).
template <typename Out, typename In, typename F, typename R>
void unary_loop_runs(const TensorArg& out, const TensorArg& a, const F& f, const R& run) {
  auto p = coalesce<2>(out.shape, {out.data, a.data},
                       {byte_strides(out.strides, sizeof(Out)),
                        byte_strides(broadcast_strides(a, out.shape), sizeof(In))});
  run_strided<2>(p, kGrainSize, [&](std::array<char*, 2>& ptrs, const std::array<int64_t, 2>& s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(ptrs[0]);
    const In* x = reinterpret_cast<const In*>(ptrs[1]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
      run(o, x, n);
    } else if (s[0] == sizeof(Out) && s[1] == 0) {
      Out v = f(x[0]);
      for (int64_t i = 0; i < n; ++i) o[i] = v;
    } else {
      char* po = ptrs[0];
      const char* px = ptrs[1];
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Out*>(po) = f(*reinterpret_cast<const In*>(px));
        po += s[0];
        px += s[1];
      }
    }
  });
}

template <typename Out, typename In, typename F>
void unary_loop(const TensorArg& out, const TensorArg& a, const F& f) {
  unary_loop_runs<Out, In>(out, a, f, [&f](Out* o, const In* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
  });
}

// out = f(a, b), a and b broadcast to out's shape.
template <typename Out, typename A, typename B, typename F>
void binary_loop(const TensorArg& out, const TensorArg& a, const TensorArg& b, const F& f) {
  auto p = coalesce<3>(out.shape, {out.data, a.data, b.data},
                       {byte_strides(out.strides, sizeof(Out)),
                        byte_strides(broadcast_strides(a, out.shape), sizeof(A)),
                        byte_strides(broadcast_strides(b, out.shape), sizeof(B))});
  run_strided<3>(p, kGrainSize, [&](std::array<char*, 3>& ptrs, const std::array<int64_t, 3>& s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(ptrs[0]);
    const A* x = reinterpret_cast<const A*>(ptrs[1]);
    const B* y = reinterpret_cast<const B*>(ptrs[2]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == sizeof(B)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == 0) {
      const B y0 = y[0];
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y0);
    } else if (s[0] == sizeof(Out) && s[1] == 0 && s[2] == sizeof(B)) {
      const A x0 = x[0];
      for (int64_t i = 0; i < n; ++i) o[i] = f(x0, y[i]);
    } else {
      char* po = ptrs[0];
      const char* px = ptrs[1];
      const char* py = ptrs[2];
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<Out*>(po) = f(*reinterpret_cast<const A*>(px), *reinterpret_cast<const B*>(py));
        po += s[0];
        px += s[1];
        py += s[2];
      }
    }
  });
}

// Ternary: out = f(a, b, c) (where, lerp, clamp with tensor bounds).
template <typename Out, typename A, typename B, typename C, typename F>
void ternary_loop(const TensorArg& out, const TensorArg& a, const TensorArg& b, const TensorArg& c, const F& f) {
  auto p = coalesce<4>(out.shape, {out.data, a.data, b.data, c.data},
                       {byte_strides(out.strides, sizeof(Out)),
                        byte_strides(broadcast_strides(a, out.shape), sizeof(A)),
                        byte_strides(broadcast_strides(b, out.shape), sizeof(B)),
                        byte_strides(broadcast_strides(c, out.shape), sizeof(C))});
  run_strided<4>(p, kGrainSize, [&](std::array<char*, 4>& ptrs, const std::array<int64_t, 4>& s, int64_t n) {
    if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == sizeof(B) && s[3] == sizeof(C)) {
      Out* o = reinterpret_cast<Out*>(ptrs[0]);
      const A* x = reinterpret_cast<const A*>(ptrs[1]);
      const B* y = reinterpret_cast<const B*>(ptrs[2]);
      const C* z = reinterpret_cast<const C*>(ptrs[3]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i], z[i]);
      return;
    }
    char* po = ptrs[0];
    const char* px = ptrs[1];
    const char* py = ptrs[2];
    const char* pz = ptrs[3];
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<Out*>(po) = f(*reinterpret_cast<const A*>(px), *reinterpret_cast<const B*>(py),
                                      *reinterpret_cast<const C*>(pz));
      po += s[0];
      px += s[1];
      py += s[2];
      pz += s[3];
    }
  });
}

inline void check_same_dtype(const TensorArg& a, const TensorArg& b, const char* what) {
  if (a.dtype != b.dtype) throw std::invalid_argument(std::string(what) + ": operands must have the same dtype");
}

}  // namespace ember
