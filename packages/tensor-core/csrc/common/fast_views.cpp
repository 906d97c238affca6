// The view ops on the native fast path: view, transpose, permute, unsqueeze and expand compute
// the result's sizes and strides here (what views.py's kernels compute in Python) and return a
// tensor over the same storage whose _base is set as make_view sets it. A view computes no
// data, so every known dtype qualifies. Anything unusual (a symbolic size, a bool or an int
// subclass where an int is expected, an out-of-range dim, a shape that does not fit) returns
// NOT_HANDLED and the Python kernel raises PyTorch's error.
#include <cstring>

#include "device_fast_path.h"
#include "fast_ops.h"

namespace ember {

namespace {

constexpr int32_t kMaxViewDims = 64;

PyObject* view(TensorObject* t, PyObject* size) {
  int64_t shape[kMaxViewDims], strides[kMaxViewDims];
  int32_t n;
  if (!read_int_sequence(size, shape, &n, kMaxViewDims)) return NOT_HANDLED;
  // infer_size: at most one -1, no other negative size, the element count unchanged.
  int64_t total = 1, known = 1;
  int32_t unknown = -1;
  for (int32_t i = 0; i < t->ndim; ++i) total *= t->sizes[i];
  for (int32_t i = 0; i < n; ++i) {
    if (shape[i] == -1) {
      if (unknown >= 0) return NOT_HANDLED;
      unknown = i;
    } else if (shape[i] < 0) {
      return NOT_HANDLED;
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      return NOT_HANDLED;
    }
  }
  if (unknown >= 0) {
    if (known == 0 || total % known != 0) return NOT_HANDLED;
    shape[unknown] = total / known;
  } else if (known != total) {
    return NOT_HANDLED;
  }
  if (!view_strides_c(t, shape, n, strides)) return NOT_HANDLED;
  return make_view_of(t, shape, strides, n);
}

PyObject* transpose(TensorObject* t, PyObject* dim0, PyObject* dim1) {
  int64_t d0, d1;
  int32_t w0, w1;
  if (t->ndim == 0 || !read_int(dim0, &d0) || !read_int(dim1, &d1) || !wrap_dim_c(d0, t->ndim, &w0) ||
      !wrap_dim_c(d1, t->ndim, &w1))
    return NOT_HANDLED;
  int64_t shape[kMaxViewDims], strides[kMaxViewDims];
  if (t->ndim > kMaxViewDims) return NOT_HANDLED;
  std::memcpy(shape, t->sizes, sizeof(int64_t) * t->ndim);
  std::memcpy(strides, t->strides, sizeof(int64_t) * t->ndim);
  std::swap(shape[w0], shape[w1]);
  std::swap(strides[w0], strides[w1]);
  return make_view_of(t, shape, strides, t->ndim);
}

PyObject* permute(TensorObject* t, PyObject* dims) {
  int64_t order[kMaxViewDims], shape[kMaxViewDims], strides[kMaxViewDims];
  int32_t n;
  if (!read_int_sequence(dims, order, &n, kMaxViewDims) || n != t->ndim) return NOT_HANDLED;
  bool seen[kMaxViewDims] = {};
  for (int32_t i = 0; i < n; ++i) {
    int32_t d;
    if (!wrap_dim_c(order[i], n, &d) || seen[d]) return NOT_HANDLED;
    seen[d] = true;
    shape[i] = t->sizes[d];
    strides[i] = t->strides[d];
  }
  return make_view_of(t, shape, strides, n);
}

PyObject* unsqueeze(TensorObject* t, PyObject* dim) {
  int64_t v;
  int32_t d;
  int32_t n = t->ndim;
  if (n + 1 > kMaxViewDims || !read_int(dim, &v) || !wrap_dim_c(v, n + 1, &d)) return NOT_HANDLED;
  int64_t shape[kMaxViewDims], strides[kMaxViewDims];
  for (int32_t i = 0, j = 0; i <= n; ++i) {
    if (i == d) {
      shape[i] = 1;
      strides[i] = d < n ? t->strides[d] * t->sizes[d] : 1;
    } else {
      shape[i] = t->sizes[j];
      strides[i] = t->strides[j];
      ++j;
    }
  }
  return make_view_of(t, shape, strides, n + 1);
}

PyObject* expand(TensorObject* t, PyObject* size) {
  int64_t target[kMaxViewDims], strides[kMaxViewDims];
  int32_t n;
  if (!read_int_sequence(size, target, &n, kMaxViewDims) || n < t->ndim) return NOT_HANDLED;
  int32_t lead = n - t->ndim;
  bool broadcast = false;
  for (int32_t i = 0; i < n; ++i) {
    if (i < lead) {
      if (target[i] < 0) return NOT_HANDLED;
      strides[i] = 0;
      broadcast = true;
      continue;
    }
    int64_t cur = t->sizes[i - lead];
    if (target[i] == -1) target[i] = cur;
    if (cur == target[i]) {
      strides[i] = t->strides[i - lead];
    } else if (cur == 1 && target[i] >= 0) {
      strides[i] = 0;
      broadcast = true;
    } else {
      return NOT_HANDLED;
    }
  }
  if (broadcast) {  // only broadcast dims can grow the element count past int64
    int64_t total = 1;
    for (int32_t i = 0; i < n; ++i)
      if (__builtin_mul_overflow(total, target[i], &total)) return NOT_HANDLED;
  }
  return make_view_of(t, target, strides, n);
}

}  // namespace

// An exact Python int (not a bool, not a subclass such as compile's symbolic sizes).
bool read_int(PyObject* o, int64_t* out) {
  if (!PyLong_CheckExact(o)) return false;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  *out = v;
  return true;
}

bool read_int_sequence(PyObject* seq, int64_t* out, int32_t* n, int32_t max) {
  if (!PyTuple_CheckExact(seq) && !PyList_CheckExact(seq)) return false;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
  if (len > max) return false;
  PyObject** items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < len; ++i)
    if (!read_int(items[i], &out[i])) return false;
  *n = static_cast<int32_t>(len);
  return true;
}

bool wrap_dim_c(int64_t dim, int32_t ndim, int32_t* out) {
  int64_t n = ndim > 1 ? ndim : 1;
  if (dim < -n || dim >= n) return false;
  *out = static_cast<int32_t>(dim < 0 ? dim + n : dim);
  return true;
}

// shapes.view_strides, step for step: size-1 dims of the old layout constrain nothing; each run
// of old dims contiguous among themselves is re-split into consecutive new dims.
bool view_strides_c(const TensorObject* t, const int64_t* new_sizes, int32_t new_ndim, int64_t* new_strides) {
  int64_t total = 1;
  for (int32_t i = 0; i < t->ndim; ++i) total *= t->sizes[i];
  if (total == 0) {
    int64_t acc = 1;
    for (int32_t i = new_ndim - 1; i >= 0; --i) {
      new_strides[i] = acc;
      acc *= new_sizes[i] > 1 ? new_sizes[i] : 1;
    }
    return true;
  }
  int64_t old_s[kMaxViewDims], old_st[kMaxViewDims];
  int32_t n_old = 0;
  for (int32_t i = 0; i < t->ndim; ++i) {
    if (t->sizes[i] == 1) continue;
    old_s[n_old] = t->sizes[i];
    old_st[n_old++] = t->strides[i];
  }
  int32_t oi = 0, ni = 0;
  while (ni < new_ndim) {
    if (new_sizes[ni] == 1) {
      new_strides[ni] = n_old == 0 || oi >= n_old ? 1 : old_st[oi] * old_s[oi];
      ++ni;
      continue;
    }
    if (oi >= n_old) return false;
    int32_t oj = oi;
    while (oj + 1 < n_old && old_st[oj] == old_st[oj + 1] * old_s[oj + 1]) ++oj;
    int64_t chunk_total = 1;
    for (int32_t k = oi; k <= oj; ++k) chunk_total *= old_s[k];
    int64_t acc = 1;
    int32_t start = ni;
    while (ni < new_ndim && acc < chunk_total) acc *= new_sizes[ni++];
    if (acc != chunk_total) return false;
    int64_t st = old_st[oj];
    for (int32_t k = ni - 1; k >= start; --k) {
      new_strides[k] = st;
      st *= new_sizes[k];
    }
    oi = oj + 1;
  }
  return oi == n_old;
}

PyObject* make_view_of(TensorObject* src, const int64_t* sizes, const int64_t* strides, int32_t ndim) {
  return make_view_at(src, sizes, strides, ndim, src->offset_value);
}

PyObject* make_view_at(TensorObject* src, const int64_t* sizes, const int64_t* strides, int32_t ndim,
                       int64_t offset) {
  // In inference mode a view of a tensor that requires grad is marked by views.py's make_view
  // (Note [Views made without recording]): the Python kernel makes it.
  PyObject* root = src->base != nullptr && src->base != Py_None ? src->base : reinterpret_cast<PyObject*>(src);
  if (g_dispatch.inference_used != nullptr && PyList_GET_ITEM(g_dispatch.inference_used, 0) != Py_False &&
      is_tensor_base(root) && reinterpret_cast<TensorObject*>(root)->rg) {
    int on = inference_now();
    if (on < 0) return nullptr;
    if (on) return NOT_HANDLED;
  }
  PyObject* out = new_tensor(src->storage, src->storage_ptr, sizes, strides, ndim, offset, src->dtype_code,
                             src->device);
  if (out == nullptr) return nullptr;
  auto* o = reinterpret_cast<TensorObject*>(out);
  // new_tensor takes the registered dtype object for the code; keep the source's own object.
  Py_SETREF(o->dtype, Py_NewRef(src->dtype));
  PyObject* base = src->base != nullptr && src->base != Py_None ? src->base : reinterpret_cast<PyObject*>(src);
  Py_SETREF(o->base, Py_NewRef(base));
  o->view_of_grad = is_tensor_base(base) && reinterpret_cast<TensorObject*>(base)->rg;
  if (src->view_of_grad == 2) o->view_of_grad = 2;  // the unrecorded chain continues (tensor_impl.cpp)
  if (src->vc != nullptr) o->vc = version_counter_ref(src->vc);  // else both read the storage's counter
  stamp_view_version(o);
  return out;
}

PyObject* fast_view_kernel(int kind, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1) return NOT_HANDLED;
  TensorObject* t = plain_view_source(args[0]);
  if (t == nullptr) t = cuda_view_source(args[0]);  // a CUDA view's kernel is this one too
  if (t == nullptr || t->ndim > kMaxViewDims) return NOT_HANDLED;
  switch (kind) {
    case kView: return nargs == 2 ? view(t, args[1]) : NOT_HANDLED;
    case kTranspose: return nargs == 3 ? transpose(t, args[1], args[2]) : NOT_HANDLED;
    case kPermute: return nargs == 2 ? permute(t, args[1]) : NOT_HANDLED;
    case kUnsqueeze: return nargs == 2 ? unsqueeze(t, args[1]) : NOT_HANDLED;
    case kExpand: return nargs == 2 ? expand(t, args[1]) : NOT_HANDLED;
    default: return NOT_HANDLED;
  }
}

}  // namespace ember
