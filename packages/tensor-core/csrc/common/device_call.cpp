// Plugin devices' library calls through a function pointer: `_C._device_call(fn, *args)` calls the C
// function at address `fn` with up to 24 arguments of the integer class (pointers, size_t, int32/int64,
// enums) and returns its int result (a cuBLAS/cuBLASLt status). ember-cuda finds the addresses with
// ctypes once (`cublasGemmEx`, `cublasLtMatmul`, ...) and calls them here: ctypes converts each of a
// GEMM's ~19 arguments through its argtypes per call (~2.4 us a call), this reads Python ints.
//
// The prototype is declared with every parameter a 64-bit integer: on the 64-bit ABIs the core builds
// for (x86-64 System V, AArch64 AAPCS64) an integer-class argument travels in the same register or
// 8-byte stack slot whatever its width, and a 32-bit parameter is read from the low half, so a function
// whose parameters are all of the integer class (no float or struct passed by value: cuBLAS's scalars
// travel by pointer) sees exactly what its own prototype would have passed. The callers pass 32-bit
// values as Python ints in range; negative ones are sign-extended (CUBLAS_GEMM_DEFAULT is -1).
// The GIL is released during the call, as ctypes does.
//
// `_device_call_recorder(status)` gives the address of a C function with that prototype that keeps the
// values it was passed (`_device_call_recorded()`) and returns `status` (tests, and the fake host).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <stdexcept>

#include "../bindings.h"

namespace ember {

namespace {

constexpr int kMaxArgs = 24;
using U = uint64_t;

int call_with(void* fn, const U* a, Py_ssize_t n) {
  // One prototype per arity: the callee reads as many parameters as its own prototype declares.
  switch (n) {
#define EMBER_CALL(N, ...) \
  case N:                  \
    return reinterpret_cast<int (*)(EMBER_TYPES_##N)>(fn)(__VA_ARGS__);
#define EMBER_TYPES_0 void
#define EMBER_TYPES_1 U
#define EMBER_TYPES_2 U, U
#define EMBER_TYPES_3 U, U, U
#define EMBER_TYPES_4 EMBER_TYPES_3, U
#define EMBER_TYPES_5 EMBER_TYPES_4, U
#define EMBER_TYPES_6 EMBER_TYPES_5, U
#define EMBER_TYPES_7 EMBER_TYPES_6, U
#define EMBER_TYPES_8 EMBER_TYPES_7, U
#define EMBER_TYPES_9 EMBER_TYPES_8, U
#define EMBER_TYPES_10 EMBER_TYPES_9, U
#define EMBER_TYPES_11 EMBER_TYPES_10, U
#define EMBER_TYPES_12 EMBER_TYPES_11, U
#define EMBER_TYPES_13 EMBER_TYPES_12, U
#define EMBER_TYPES_14 EMBER_TYPES_13, U
#define EMBER_TYPES_15 EMBER_TYPES_14, U
#define EMBER_TYPES_16 EMBER_TYPES_15, U
#define EMBER_TYPES_17 EMBER_TYPES_16, U
#define EMBER_TYPES_18 EMBER_TYPES_17, U
#define EMBER_TYPES_19 EMBER_TYPES_18, U
#define EMBER_TYPES_20 EMBER_TYPES_19, U
#define EMBER_TYPES_21 EMBER_TYPES_20, U
#define EMBER_TYPES_22 EMBER_TYPES_21, U
#define EMBER_TYPES_23 EMBER_TYPES_22, U
#define EMBER_TYPES_24 EMBER_TYPES_23, U
    EMBER_CALL(0)
    EMBER_CALL(1, a[0])
    EMBER_CALL(2, a[0], a[1])
    EMBER_CALL(3, a[0], a[1], a[2])
    EMBER_CALL(4, a[0], a[1], a[2], a[3])
    EMBER_CALL(5, a[0], a[1], a[2], a[3], a[4])
    EMBER_CALL(6, a[0], a[1], a[2], a[3], a[4], a[5])
    EMBER_CALL(7, a[0], a[1], a[2], a[3], a[4], a[5], a[6])
    EMBER_CALL(8, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7])
    EMBER_CALL(9, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8])
    EMBER_CALL(10, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9])
    EMBER_CALL(11, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10])
    EMBER_CALL(12, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11])
    EMBER_CALL(13, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12])
    EMBER_CALL(14, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13])
    EMBER_CALL(15, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14])
    EMBER_CALL(16, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
               a[15])
    EMBER_CALL(17, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
               a[15], a[16])
    EMBER_CALL(18, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
               a[15], a[16], a[17])
    EMBER_CALL(19, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
               a[15], a[16], a[17], a[18])
    EMBER_CALL(20, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
               a[15], a[16], a[17], a[18], a[19])
    EMBER_CALL(21, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
               a[15], a[16], a[17], a[18], a[19], a[20])
    EMBER_CALL(22, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
               a[15], a[16], a[17], a[18], a[19], a[20], a[21])
    EMBER_CALL(23, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
               a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22])
    EMBER_CALL(24, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
               a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23])
#undef EMBER_CALL
    default:
      return -1;
  }
}

// An argument as 64 bits: None is a null pointer; an int in [-2^63, 2^64) its two's complement.
bool to_u64(PyObject* o, U* out) {
  if (o == Py_None) {
    *out = 0;
    return true;
  }
  if (!PyLong_Check(o)) {
    PyErr_Format(PyExc_TypeError, "_device_call: arguments must be ints or None, not %.100s", Py_TYPE(o)->tp_name);
    return false;
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow == 0) {
    if (v == -1 && PyErr_Occurred()) return false;
    *out = static_cast<U>(v);
    return true;
  }
  if (overflow > 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
    *out = u;
    return true;
  }
  PyErr_SetString(PyExc_OverflowError, "_device_call: an argument does not fit in 64 bits");
  return false;
}

PyObject* py_device_call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || nargs - 1 > kMaxArgs) {
    PyErr_Format(PyExc_TypeError, "_device_call(fn, *args) takes a function address and at most %d arguments",
                 kMaxArgs);
    return nullptr;
  }
  U fn = 0;
  if (!to_u64(args[0], &fn)) return nullptr;
  if (fn == 0) {
    PyErr_SetString(PyExc_ValueError, "_device_call: null function address");
    return nullptr;
  }
  U a[kMaxArgs];
  for (Py_ssize_t i = 1; i < nargs; ++i)
    if (!to_u64(args[i], &a[i - 1])) return nullptr;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = call_with(reinterpret_cast<void*>(static_cast<uintptr_t>(fn)), a, nargs - 1);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(rc);
}

// The recorder: what its last call received (values and count), and the status it returns. Calls from
// several threads arrive one at a time under the GIL in the tests that use it.
U g_rec[kMaxArgs];
int g_rec_status = 0;
long long g_rec_calls = 0;

int recorder(U a0, U a1, U a2, U a3, U a4, U a5, U a6, U a7, U a8, U a9, U a10, U a11, U a12, U a13, U a14, U a15,
             U a16, U a17, U a18, U a19, U a20, U a21, U a22, U a23) {
  // Every slot is read: a caller of fewer arguments leaves the rest undefined (the test reads only as
  // many as it passed).
  const U v[kMaxArgs] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11,
                         a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23};
  for (int i = 0; i < kMaxArgs; ++i) g_rec[i] = v[i];
  ++g_rec_calls;
  return g_rec_status;
}

PyObject* py_recorder(PyObject*, PyObject* args) {
  int status = 0;
  if (!PyArg_ParseTuple(args, "|i", &status)) return nullptr;
  g_rec_status = status;
  g_rec_calls = 0;
  return PyLong_FromUnsignedLongLong(reinterpret_cast<uintptr_t>(&recorder));
}

PyObject* py_recorded(PyObject*, PyObject* args) {
  int n = 0;
  if (!PyArg_ParseTuple(args, "i", &n)) return nullptr;
  if (n < 0 || n > kMaxArgs) {
    PyErr_Format(PyExc_ValueError, "_device_call_recorded(n): n in [0, %d]", kMaxArgs);
    return nullptr;
  }
  PyObject* t = PyTuple_New(n + 1);
  if (t == nullptr) return nullptr;
  PyTuple_SET_ITEM(t, 0, PyLong_FromLongLong(g_rec_calls));
  for (int i = 0; i < n; ++i) PyTuple_SET_ITEM(t, i + 1, PyLong_FromUnsignedLongLong(g_rec[i]));
  return t;
}

PyMethodDef methods[] = {
    {"_device_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_device_call)), METH_FASTCALL,
     "_device_call(fn, *args): calls the C function at address fn with up to 24 integer-class arguments "
     "(ints or None; pointers, sizes, enums, 32/64-bit ints), the GIL released; returns its int result."},
    {"_device_call_recorder", py_recorder, METH_VARARGS,
     "_device_call_recorder(status=0): the address of a C function that keeps the 64-bit values of its (up to 24) "
     "arguments and returns status (tests)."},
    {"_device_call_recorded", py_recorded, METH_VARARGS,
     "_device_call_recorded(n): (calls since the recorder was made, first n argument values as unsigned ints)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_device_call(PyObject* module) {
  if (PyModule_AddFunctions(module, methods) < 0) throw std::runtime_error("module init");
}

}  // namespace ember
