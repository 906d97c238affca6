// _C.FastFront(op, kind, fallback): the public function or method (`ember.sum`, `Tensor.view`)
// of an op whose Python form only normalises arguments before calling the op. Its call reads
// the arguments as the Python function does (positional or by keyword), builds the op's
// positional arguments exactly as the Python function would pass them, and calls the op through
// the fast path (fast_call: native kernel, grad recorded natively). Anything else (a dispatch
// mode, a subclass, an argument the native reading does not cover, a case the op's native
// kernel declines) calls `fallback`, the Python function, with the original arguments, so
// results and errors are the Python path's. Binds as a method (Tensor.sum = the front) and
// reports the fallback's name, docstring and signature (`__wrapped__`).
#include <cstddef>
#include <stdexcept>

#include "device_fast_path.h"
#include "autograd_record.h"
#include "fast_ops.h"

namespace ember {

namespace {

// What a front reads (the Python function it stands for).
enum FrontKind : int {
  kFrontSum = 1,         // sum(input, dim=None, keepdim=False, *, dtype=None, out=None) -> sum_op
  kFrontMean = 2,        // mean(...), same arguments -> mean_op
  kFrontView = 3,        // Tensor.view(*shape) -> view_op(self, shape)
  kFrontReshape = 4,     // reshape(self, *shape) -> view_op(self, inferred shape) when it is a view
  kFrontFlatten = 5,     // flatten(self, start_dim=0, end_dim=-1) -> as reshape
  kFrontTranspose = 6,   // transpose(self, dim0, dim1) -> transpose_op
  kFrontT = 7,           // t(self) -> transpose_op(self, 0, 1) for a matrix
  kFrontPermute = 8,     // permute(self, *dims) -> permute_op(self, dims)
  kFrontUnsqueeze = 9,   // unsqueeze(self, dim) -> unsqueeze_op
  kFrontExpand = 10,     // Tensor.expand(*size) -> expand_op(self, size)
  kFrontContiguous = 11, // Tensor.contiguous() -> self when already contiguous
  kFrontMatmul = 12,     // matmul(input, other) -> mm_op for two matrices
  kFrontWhere = 13,      // where(condition, input, other) -> where_op
  kFrontOp2 = 14,        // add/sub/mul/div(tensor, other), Tensor.add_/sub_/div_(other): no keyword -> the op
  kFrontAddmm = 15,      // addmm(input, mat1, mat2, *, beta=1, alpha=1) -> addmm_op (beta/alpha: no grad)
  kFrontSqueeze = 16,    // squeeze(self, dim=None) -> squeeze_op(self, None or dims)
  kFrontGetitem = 17,    // Tensor.__getitem__(self, index) -> select/slice/unsqueeze/alias ops (fast_index.cpp)
  kFrontBmm = 18,        // bmm(input, mat2) with no keyword -> bmm_op
  kFrontLast = 18,
};

struct FrontObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* op;        // the dispatcher op called on the fast path (an OpBase), owned
  PyObject* fallback;  // the Python function, owned
  int kind;
};

PyTypeObject FrontType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyObject* s_dim = nullptr;
PyObject* s_keepdim = nullptr;
PyObject* s_beta = nullptr;
PyObject* s_alpha = nullptr;
PyObject* g_int0 = nullptr;
PyObject* g_int1 = nullptr;

// The sizes of `x.view(2, 3)`-style calls (shapes.as_shape's forms: ints, or one list/tuple of
// ints) as a new tuple, or NOT_HANDLED.
PyObject* size_args(PyObject* const* args, Py_ssize_t n) {
  // (A tuple subclass, ember.Size, becomes a plain tuple, as as_shape makes it.)
  if (n == 1 && (PyTuple_Check(args[0]) || PyList_CheckExact(args[0]))) {
    PyObject* seq = args[0];
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i)
      if (!PyLong_CheckExact(PySequence_Fast_ITEMS(seq)[i])) return NOT_HANDLED;
    if (PyTuple_CheckExact(seq)) return Py_NewRef(seq);
    return PyList_CheckExact(seq) ? PyList_AsTuple(seq) : PyTuple_GetSlice(seq, 0, PyTuple_GET_SIZE(seq));
  }
  if (n < 1) return NOT_HANDLED;
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!PyLong_CheckExact(args[i])) return NOT_HANDLED;
  PyObject* t = PyTuple_New(n);
  if (t == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) PyTuple_SET_ITEM(t, i, Py_NewRef(args[i]));
  return t;
}

// t()'s result recorded as transpose(0, 1) gets PyTorch's node name, TBackward0: the node's
// class becomes its "t"-labelled subclass (autograd's label_grad_fn makes it once; the pair of
// classes is kept, so later calls swap the type with no Python call). Takes and returns `r`.
PyTypeObject* g_t_from = nullptr;  // the transpose node class (owned)
PyTypeObject* g_t_to = nullptr;    // its TBackward0 subclass (owned)
PyObject* name_t_node(PyObject* r) {
  if (!is_tensor_base(r)) return r;
  PyObject* node = reinterpret_cast<TensorObject*>(r)->grad_fn;
  if (node == nullptr || node == Py_None || !is_node(node)) return r;
  PyTypeObject* cls = Py_TYPE(node);
  if (cls == g_t_from && g_t_to != nullptr) {
    // Same layout (a slot-less heap subclass): the swap Python's `node.__class__ = ...` makes.
    Py_INCREF(g_t_to);
    Py_SET_TYPE(node, g_t_to);
    Py_DECREF(cls);
    return r;
  }
  if (g_t_to != nullptr && cls == g_t_to) return r;
  PyObject* common = PyImport_ImportModule("ember._src.ops._common");
  PyObject* done = common == nullptr ? nullptr : PyObject_CallMethod(common, "label_as_op", "Os", r, "t");
  Py_XDECREF(common);
  if (done == nullptr) {
    Py_DECREF(r);
    return nullptr;
  }
  Py_DECREF(done);
  PyTypeObject* now = Py_TYPE(node);
  if (now != cls && g_t_from == nullptr) {
    g_t_from = reinterpret_cast<PyTypeObject*>(Py_NewRef(reinterpret_cast<PyObject*>(cls)));
    g_t_to = reinterpret_cast<PyTypeObject*>(Py_NewRef(reinterpret_cast<PyObject*>(now)));
  }
  return r;
}

// The op called with args[0] and one more argument (a new reference the call consumes).
PyObject* call_with(FrontObject* f, PyObject* self, PyObject* arg) {
  if (arg == nullptr || arg == NOT_HANDLED) return arg;
  PyObject* call[2] = {self, arg};
  PyObject* r = fast_call(reinterpret_cast<OpObject*>(f->op), call, 2);
  Py_DECREF(arg);
  return r;
}

// reshape's shape after infer_size, as a tuple of ints (NOT_HANDLED for anything unusual).
PyObject* inferred_shape(TensorObject* t, PyObject* shape) {
  int64_t sizes[64];
  int32_t n;
  if (!read_int_sequence(shape, sizes, &n, 64)) return NOT_HANDLED;
  int64_t total = 1, known = 1;
  int32_t unknown = -1;
  for (int32_t i = 0; i < t->ndim; ++i) total *= t->sizes[i];
  for (int32_t i = 0; i < n; ++i) {
    if (sizes[i] == -1 && unknown < 0) unknown = i;
    else if (sizes[i] < 0 || __builtin_mul_overflow(known, sizes[i], &known)) return NOT_HANDLED;
  }
  if (unknown < 0) return known == total ? Py_NewRef(shape) : NOT_HANDLED;
  if (known == 0 || total % known != 0) return NOT_HANDLED;
  PyObject* out = PyTuple_New(n);
  if (out == nullptr) return nullptr;
  for (int32_t i = 0; i < n; ++i) {
    PyObject* v = i == unknown ? PyLong_FromLongLong(total / known) : Py_NewRef(PyTuple_GET_ITEM(shape, i));
    if (v == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, i, v);
  }
  return out;
}

PyObject* reshape_to(FrontObject* f, PyObject* self, TensorObject* t, PyObject* shape) {
  if (shape == nullptr || shape == NOT_HANDLED) return shape;
  PyObject* inferred = inferred_shape(t, shape);
  Py_DECREF(shape);
  return call_with(f, self, inferred);
}

// sum/mean: (input, dim=None, keepdim=False) positionally or by keyword; dtype/out fall back.
PyObject* reduce_front(FrontObject* f, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (nargs < 1 || nargs > 3) return NOT_HANDLED;
  PyObject* call[4] = {args[0], nargs > 1 ? args[1] : Py_None, nargs > 2 ? args[2] : Py_False, Py_None};
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, i);
    if (key == s_dim && nargs < 2) call[1] = args[nargs + i];
    else if (key == s_keepdim && nargs < 3) call[2] = args[nargs + i];
    else return NOT_HANDLED;
  }
  return fast_call(reinterpret_cast<OpObject*>(f->op), call, 4);
}

// addmm(input, mat1, mat2, *, beta=1, alpha=1): with beta/alpha other than 1, computed natively
// when no argument needs grad (the op records its kwargs through the Python dispatcher).
PyObject* addmm_front(FrontObject* f, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (nargs != 3) return NOT_HANDLED;
  PyObject* scale[2] = {nullptr, nullptr};  // beta, alpha
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, i);
    if (key == s_beta) scale[0] = args[nargs + i];
    else if (key == s_alpha) scale[1] = args[nargs + i];
    else return NOT_HANDLED;
  }
  bool unit = true;
  for (PyObject* v : scale)
    if (v != nullptr && !((PyLong_CheckExact(v) || PyFloat_CheckExact(v)) && PyObject_RichCompareBool(v, g_int1, Py_EQ) == 1))
      unit = false;
  PyErr_Clear();
  if (unit) return fast_call(reinterpret_cast<OpObject*>(f->op), args, 3);
  for (Py_ssize_t i = 0; i < 3; ++i)
    if (is_tensor_base(args[i]) && reinterpret_cast<TensorObject*>(args[i])->rg) {
      int on = grad_enabled_now();
      if (on != 0) return on < 0 ? nullptr : NOT_HANDLED;
    }
  return fast_addmm_scaled(args, scale[0] ? scale[0] : g_int1, scale[1] ? scale[1] : g_int1);
}

// squeeze(self, dim=None): dim None, an int or a sequence of ints (the Python function's forms).
PyObject* squeeze_front(FrontObject* f, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs < 1 || nargs + nkw > 2 || (nkw == 1 && PyTuple_GET_ITEM(kwnames, 0) != s_dim)) return NOT_HANDLED;
  TensorObject* t = plain_view_source(args[0]);
  if (t == nullptr || t->ndim == 0) return NOT_HANDLED;
  PyObject* dim = nargs + nkw == 2 ? args[1] : Py_None;
  PyObject* dims;
  if (dim == Py_None) dims = Py_NewRef(Py_None);
  else if (PyLong_CheckExact(dim)) dims = Py_NewRef(dim);  // an int stays one: squeeze.dim's node name
  else if (PyTuple_CheckExact(dim)) dims = Py_NewRef(dim);
  else if (PyList_CheckExact(dim)) dims = PyList_AsTuple(dim);
  else return NOT_HANDLED;
  return call_with(f, args[0], dims);
}

PyObject* front_fast(FrontObject* f, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (f->kind == kFrontSum || f->kind == kFrontMean) return reduce_front(f, args, nargs, kwnames);
  if (f->kind == kFrontAddmm) return addmm_front(f, args, nargs, kwnames);
  if (f->kind == kFrontSqueeze) return squeeze_front(f, args, nargs, kwnames);
  if (kwnames != nullptr || nargs < 1) return NOT_HANDLED;
  if (f->kind == kFrontWhere)
    return nargs == 3 ? fast_call(reinterpret_cast<OpObject*>(f->op), args, 3) : NOT_HANDLED;
  if (f->kind == kFrontBmm)
    return nargs == 2 ? fast_call(reinterpret_cast<OpObject*>(f->op), args, 2) : NOT_HANDLED;
  if (f->kind == kFrontGetitem) return nargs == 2 ? fast_getitem(f->op, args[0], args[1]) : NOT_HANDLED;
  PyObject* self = args[0];
  TensorObject* t = plain_view_source(self);
  if (t == nullptr) t = cuda_view_source(self);  // views and contiguous only: other kernels decline CUDA
  if (t == nullptr) return NOT_HANDLED;
  auto* op = reinterpret_cast<OpObject*>(f->op);
  switch (f->kind) {
    case kFrontView: return call_with(f, self, size_args(args + 1, nargs - 1));
    case kFrontPermute: return call_with(f, self, size_args(args + 1, nargs - 1));
    case kFrontExpand: return call_with(f, self, size_args(args + 1, nargs - 1));
    case kFrontReshape: return reshape_to(f, self, t, size_args(args + 1, nargs - 1));
    case kFrontFlatten: {
      int64_t s = 0, e = -1;
      if (nargs > 3 || t->ndim == 0 || t->ndim > 64) return NOT_HANDLED;
      for (Py_ssize_t i = 1; i < nargs; ++i) {
        if (!PyLong_CheckExact(args[i])) return NOT_HANDLED;
        int overflow = 0;
        (i == 1 ? s : e) = PyLong_AsLongLongAndOverflow(args[i], &overflow);
        if (overflow) return NOT_HANDLED;
      }
      int32_t ws, we;
      if (!wrap_dim_c(s, t->ndim, &ws) || !wrap_dim_c(e, t->ndim, &we) || ws > we) return NOT_HANDLED;
      if (ws == we) return Py_NewRef(self);
      PyObject* shape = PyTuple_New(t->ndim - (we - ws));
      if (shape == nullptr) return nullptr;
      int64_t merged = 1;
      for (int32_t i = ws; i <= we; ++i) merged *= t->sizes[i];
      Py_ssize_t j = 0;
      for (int32_t i = 0; i < t->ndim; ++i) {
        if (i > ws && i <= we) continue;
        PyObject* v = PyLong_FromLongLong(i == ws ? merged : t->sizes[i]);
        if (v == nullptr) {
          Py_DECREF(shape);
          return nullptr;
        }
        PyTuple_SET_ITEM(shape, j++, v);
      }
      return reshape_to(f, self, t, shape);
    }
    case kFrontTranspose:
    case kFrontUnsqueeze:
      if (nargs != (f->kind == kFrontTranspose ? 3 : 2)) return NOT_HANDLED;
      return fast_call(op, args, nargs);
    case kFrontT: {
      if (nargs != 1 || t->ndim != 2) return NOT_HANDLED;
      PyObject* call[3] = {self, g_int0, g_int1};
      PyObject* r = fast_call(op, call, 3);
      return r == nullptr || r == NOT_HANDLED ? r : name_t_node(r);
    }
    case kFrontContiguous:
      return nargs == 1 && contiguous_strides(t) ? Py_NewRef(self) : NOT_HANDLED;
    case kFrontMatmul:
      if (nargs != 2 || t->ndim != 2) return NOT_HANDLED;
      return fast_call(op, args, 2);
    case kFrontOp2: {
      // add(a, b) is add_op(a, b) and add_(other) add_inplace_op(self, other) when alpha is 1 and no
      // operand is bool (sub's bool check); the op call keeps every dispatch layer (autograd records
      // in-place writes).
      if (nargs != 2 || plain_tensor(self, true) == nullptr) return NOT_HANDLED;
      PyObject* other = args[1];
      if (is_tensor_base(other) ? plain_tensor(other, true) == nullptr
                                : !(PyFloat_CheckExact(other) || PyLong_CheckExact(other)))
        return NOT_HANDLED;
      return PyObject_Vectorcall(f->op, args, 2, nullptr);
    }
    default: return NOT_HANDLED;
  }
}

PyObject* front_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* f = reinterpret_cast<FrontObject*>(self);
  if (plain_dispatch_for(f->op, args, PyVectorcall_NARGS(nargsf), kwnames)) {
    PyObject* r = front_fast(f, args, PyVectorcall_NARGS(nargsf), kwnames);
    if (r != NOT_HANDLED) return r;
  }
  return PyObject_Vectorcall(f->fallback, args, nargsf, kwnames);
}

PyObject* front_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *op, *fallback;
  int kind;
  if (kwargs != nullptr || !PyArg_ParseTuple(args, "OiO:FastFront", &op, &kind, &fallback)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "FastFront(op, kind, fallback)");
    return nullptr;
  }
  if (!PyObject_TypeCheck(op, &OpBaseType) || kind < 1 || kind > kFrontLast || !PyCallable_Check(fallback)) {
    PyErr_SetString(PyExc_TypeError, "FastFront(op: OpBase, kind: a known kind, fallback: callable)");
    return nullptr;
  }
  PyObject* self = type->tp_alloc(type, 0);
  if (self == nullptr) return nullptr;
  auto* f = reinterpret_cast<FrontObject*>(self);
  f->vectorcall = front_vectorcall;
  f->op = Py_NewRef(op);
  f->fallback = Py_NewRef(fallback);
  f->kind = kind;
  return self;
}

void front_dealloc(PyObject* self) {
  auto* f = reinterpret_cast<FrontObject*>(self);
  Py_CLEAR(f->op);
  Py_CLEAR(f->fallback);
  Py_TYPE(self)->tp_free(self);
}

PyObject* front_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

// The fallback's own attributes (__name__, __qualname__, __doc__, __module__, ...): a front
// presents itself as the function it stands for.
PyObject* front_getattro(PyObject* self, PyObject* name) {
  auto* f = reinterpret_cast<FrontObject*>(self);
  if (PyUnicode_Check(name) && (PyUnicode_CompareWithASCIIString(name, "__doc__") == 0 ||
                                PyUnicode_CompareWithASCIIString(name, "__module__") == 0))
    return PyObject_GetAttr(f->fallback, name);
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  PyErr_Clear();
  return PyObject_GetAttr(f->fallback, name);
}

PyObject* front_repr(PyObject* self) { return PyObject_Repr(reinterpret_cast<FrontObject*>(self)->fallback); }

PyObject* front_wrapped(PyObject* self, void*) { return Py_NewRef(reinterpret_cast<FrontObject*>(self)->fallback); }
PyObject* front_op(PyObject* self, void*) { return Py_NewRef(reinterpret_cast<FrontObject*>(self)->op); }

// Pickled (and deep-copied) by reference, as a function is: the name of the module attribute that
// holds the front (the fallback's __name__ in the fallback's __module__).
PyObject* front_reduce(PyObject* self, PyObject*) {
  return PyObject_GetAttrString(reinterpret_cast<FrontObject*>(self)->fallback, "__name__");
}

PyMethodDef front_methods[] = {
    {"__reduce__", front_reduce, METH_NOARGS, "Pickles the front by its module and name."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef front_getset[] = {
    {"__wrapped__", front_wrapped, nullptr, "The Python function this front stands for.", nullptr},
    {"_op", front_op, nullptr, "The dispatcher op the fast path calls.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

void bind_fast_front(PyObject* module) {
  FrontType.tp_name = "ember._C.FastFront";
  FrontType.tp_basicsize = sizeof(FrontObject);
  FrontType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  FrontType.tp_vectorcall_offset = offsetof(FrontObject, vectorcall);
  FrontType.tp_call = PyVectorcall_Call;
  FrontType.tp_descr_get = front_descr_get;
  FrontType.tp_new = front_new;
  FrontType.tp_dealloc = front_dealloc;
  FrontType.tp_getattro = front_getattro;
  FrontType.tp_repr = front_repr;
  FrontType.tp_getset = front_getset;
  FrontType.tp_methods = front_methods;
  if (PyType_Ready(&FrontType) < 0) throw std::runtime_error("type init");
  Py_INCREF(&FrontType);
  if (PyModule_AddObject(module, "FastFront", reinterpret_cast<PyObject*>(&FrontType)) < 0)
    throw std::runtime_error("module init");
  s_dim = PyUnicode_InternFromString("dim");
  s_keepdim = PyUnicode_InternFromString("keepdim");
  s_beta = PyUnicode_InternFromString("beta");
  s_alpha = PyUnicode_InternFromString("alpha");
  g_int0 = PyLong_FromLong(0);
  g_int1 = PyLong_FromLong(1);
}

}  // namespace ember
