"""Running an AOT library through its C interface (``ember_aoti.h``) from Python.

The package's directory (``model.so``, ``weights.bin``, ``ember_aoti.h``) is extracted to a
private temporary directory; the library is opened with ctypes, ``ember_aoti_create`` reads
the weights, and each call passes contiguous input buffers and their sizes to
``ember_aoti_run`` and copies the outputs it allocated into ember tensors. This is the same
entry point a C program uses: Python adds only the argument handling.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
import weakref

import ember
from ember._src.tensor import Tensor

from . import _pytree as pytree
from ._aoti_runtime import AOTICompiledModel

_DTYPES = {0: ember.float32, 1: ember.float64, 2: ember.int64, 3: ember.int32, 4: ember.bool}


def _bind(lib) -> None:
    i64pp = ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))
    lib.ember_aoti_create.argtypes = [ctypes.c_char_p]
    lib.ember_aoti_create.restype = ctypes.c_void_p
    lib.ember_aoti_destroy.argtypes = [ctypes.c_void_p]
    lib.ember_aoti_last_error.restype = ctypes.c_char_p
    lib.ember_aoti_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), i64pp,
                                   ctypes.POINTER(ctypes.c_void_p), i64pp]
    lib.ember_aoti_run.restype = ctypes.c_int
    lib.ember_aoti_free.argtypes = [ctypes.c_void_p]
    for name in ("ember_aoti_input_ndim", "ember_aoti_output_ndim", "ember_aoti_input_dtype",
                 "ember_aoti_output_dtype"):
        getattr(lib, name).argtypes = [ctypes.c_int]


class CModel(AOTICompiledModel):
    """A loaded C-runtime AOT package; call it with the program's user inputs (an
    ``AOTICompiledModel`` whose calls go through the library's C interface)."""

    runtime = "c"

    def __init__(self, package_dir: str, metadata: dict, owned_dir: str | None = None):
        self._dir = package_dir
        self._owned = owned_dir
        self._metadata = metadata
        self._lib = ctypes.CDLL(os.path.join(package_dir, "model.so"))
        _bind(self._lib)
        runner = self._lib.ember_aoti_create(os.fsencode(package_dir))
        if not runner:
            raise RuntimeError(f"ember_aoti_create: {self._lib.ember_aoti_last_error().decode()}")
        self._runner = runner
        lib = self._lib
        self._finalizer = weakref.finalize(self, _release, lib, runner, owned_dir)
        self._n_in, self._n_out = lib.ember_aoti_num_inputs(), lib.ember_aoti_num_outputs()
        self._in = [(lib.ember_aoti_input_ndim(i), _DTYPES[lib.ember_aoti_input_dtype(i)]) for i in range(self._n_in)]
        self._out = [(lib.ember_aoti_output_ndim(i), _DTYPES[lib.ember_aoti_output_dtype(i)])
                     for i in range(self._n_out)]
        self._in_spec = pytree.spec_from_json(metadata["in_spec"]) if metadata.get("in_spec") else None
        self._out_spec = pytree.spec_from_json(metadata["out_spec"]) if metadata.get("out_spec") else None

    @classmethod
    def from_zip(cls, z, prefix: str, metadata: dict) -> CModel:
        tmp = tempfile.mkdtemp(prefix="ember-aoti-")
        try:
            for name in ("model.so", "weights.bin", "ember_aoti.h"):
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(z.read(prefix + name))
            return cls(tmp, metadata, owned_dir=tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def get_metadata(self) -> dict:
        return dict(self._metadata)

    def get_constant_fqns(self) -> list:
        return list(self._metadata.get("lifted_targets", []))

    def load_constants(self, constants_map: dict, *, check_full_update: bool, user_managed: bool = False) -> None:
        """Replaces weights by fully qualified name (same shapes and dtypes): rewrites this
        model's private ``weights.bin`` and creates the runner again from it."""
        offsets = self._metadata.get("weight_offsets", {})
        targets = self.get_constant_fqns()
        if check_full_update and set(constants_map) != set(targets):
            missing = sorted(set(targets) - set(constants_map))
            raise RuntimeError(f"load_constants: missing constants {missing}")
        path = os.path.join(self._dir, "weights.bin")
        with open(path, "rb") as f:
            blob = bytearray(f.read())
        for target, value in constants_map.items():
            entry = offsets.get(target)
            if entry is None:
                continue
            if tuple(value.shape) != tuple(entry["shape"]) or str(value.dtype).split(".")[-1] != entry["dtype"]:
                raise RuntimeError(f"load_constants: {target} must be {tuple(entry['shape'])} {entry['dtype']}")
            data = value.detach().contiguous().numpy().tobytes()
            blob[entry["offset"]:entry["offset"] + len(data)] = data
        with open(path, "wb") as f:
            f.write(bytes(blob))
        runner = self._lib.ember_aoti_create(os.fsencode(self._dir))
        if not runner:
            raise RuntimeError(f"ember_aoti_create: {self._lib.ember_aoti_last_error().decode()}")
        self._lib.ember_aoti_destroy(self._runner)
        self._runner = runner
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _release, self._lib, runner, self._owned)

    def __call__(self, *args, **kwargs):
        flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        if self._in_spec is not None and spec != self._in_spec:
            raise ValueError(f"the inputs do not match the compiled program's structure:\n{self._in_spec}\ngot\n{spec}")
        tensors = [x for x in flat if isinstance(x, Tensor)]
        if len(tensors) != self._n_in:
            raise RuntimeError(f"expected {self._n_in} tensor inputs, got {len(tensors)}")
        keep, ptrs, sizes = [], (ctypes.c_void_p * self._n_in)(), (ctypes.POINTER(ctypes.c_int64) * self._n_in)()
        for i, (t, (ndim, dtype)) in enumerate(zip(tensors, self._in)):
            if t.device.type != "cpu" or t.dtype != dtype or t.ndim != ndim:
                raise RuntimeError(f"input {i}: the library takes a {ndim}-d cpu {dtype} tensor, got a "
                                   f"{t.ndim}-d {t.device.type} {t.dtype} one")
            t = t.detach().contiguous()
            shape = (ctypes.c_int64 * max(ndim, 1))(*t.shape)
            keep += [t, shape]
            ptrs[i] = t.data_ptr()
            sizes[i] = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        outs = (ctypes.c_void_p * max(self._n_out, 1))()
        out_shapes = [(ctypes.c_int64 * max(ndim, 1))() for ndim, _ in self._out]
        out_sizes = (ctypes.POINTER(ctypes.c_int64) * max(self._n_out, 1))(
            *[ctypes.cast(s, ctypes.POINTER(ctypes.c_int64)) for s in out_shapes])
        status = self._lib.ember_aoti_run(self._runner, ptrs, sizes, outs, out_sizes)
        if status != 0:
            raise RuntimeError(f"ember_aoti_run: {self._lib.ember_aoti_last_error().decode()}")
        results = []
        for k, (ndim, dtype) in enumerate(self._out):
            shape = tuple(out_shapes[k][d] for d in range(ndim))
            out = ember.empty(shape, dtype=dtype)
            if out.numel():
                ctypes.memmove(out.data_ptr(), outs[k], out.numel() * dtype.itemsize)
            self._lib.ember_aoti_free(outs[k])
            results.append(out)
        return pytree.tree_unflatten(results, self._out_spec) if self._out_spec is not None else results


def _release(lib, runner, owned_dir) -> None:
    lib.ember_aoti_destroy(runner)
    if owned_dir:
        shutil.rmtree(owned_dir, ignore_errors=True)
