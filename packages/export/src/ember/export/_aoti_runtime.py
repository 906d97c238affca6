"""Loading and running an AOT-compiled program (PyTorch's ``torch._inductor.aoti_load_package``).

The package (a zip) holds ``ember_aoti/model.so`` (kernels + embedded plan + embedded weights,
see ``_aoti.py``), ``ember_aoti/model.c`` (its source, for reading) and
``ember_aoti/metadata.json``. Loading copies the library to a private temporary file, opens it
with ``ctypes``, reads the plan and the weights from its data symbols, and returns an
:class:`AOTICompiledModel`. Running interprets the plan: allocate, call kernels through ctypes,
call ember ops resolved by name from the op table, return the outputs. Nothing is ``eval``-ed,
unpickled or imported from the file.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import tempfile
import zipfile

import ember
from ember._src.device import CPU
from ember._src.shapes import contiguous_strides
from ember._src.tensor import Tensor, make_tensor, make_view, new_empty_tensor

from . import _pytree as pytree
from ._graph_json import SerializationError, module_from_json, resolve_target

_PREFIX = "ember_aoti/"
PACKAGE_VERSION = "1.0"


def write_package(path, built: dict) -> None:
    metadata = {"format": "ember_aoti", "version": PACKAGE_VERSION, "plan_version": built["plan"]["version"],
                "input_names": built["plan"]["input_names"], "in_spec": built["plan"]["in_spec"],
                "out_spec": built["plan"]["out_spec"], "lifted_targets": built["plan"]["lifted_targets"],
                "runtime": built.get("runtime", "python-plan")}
    if "weight_offsets" in built:
        metadata["weight_offsets"] = built["weight_offsets"]
    if "fallback_reason" in built:
        metadata["fallback_reason"] = built["fallback_reason"]
    files = []
    if metadata["runtime"] == "c":
        for key, name in (("library", "model.so"), ("header", "ember_aoti.h"), ("weights", "weights.bin")):
            with open(built["paths"][key], "rb") as f:
                files.append((_PREFIX + name, f.read()))
    else:
        with open(built["library"], "rb") as f:
            files.append((_PREFIX + "model.so", f.read()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in ((_PREFIX + "version", PACKAGE_VERSION.encode()),
                           (_PREFIX + "metadata.json", json.dumps(metadata, indent=1).encode()),
                           *files, (_PREFIX + "model.c", built["source"].encode())):
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    data = buf.getvalue()
    if isinstance(path, (str, os.PathLike)):
        from ember.serialization._atomic import atomic_write

        with atomic_write(path) as out:
            out.write(data)
    else:
        path.write(data)


def _blob(lib, symbol: str) -> bytes:
    start = ctypes.addressof(ctypes.c_char.in_dll(lib, symbol))
    end = ctypes.addressof(ctypes.c_char.in_dll(lib, symbol + "_end"))
    return ctypes.string_at(start, end - start)


def _dtype(name: str):
    value = getattr(ember, name, None)
    if not isinstance(value, ember.dtype):
        raise SerializationError(f"unknown dtype {name!r} in the plan")
    return value


def _decode(obj, env: dict):
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return [_decode(o, env) for o in obj]
    if "buf" in obj:
        return env[obj["buf"]]
    if "view" in obj:
        base = env[obj["view"]]
        return make_view(base, tuple(obj["shape"]), tuple(obj["strides"]), base._offset + obj["offset"])
    if "tuple" in obj:
        return tuple(_decode(o, env) for o in obj["tuple"])
    if "dtype" in obj:
        return _dtype(obj["dtype"])
    if "device" in obj:
        return ember.device(obj["device"])
    if "float" in obj:
        return float(obj["float"])
    if "graph" in obj:
        return obj["_module"]
    if "enum" in obj and obj["enum"] in ("contiguous_format", "channels_last", "preserve_format"):
        return getattr(ember, obj["enum"])
    raise SerializationError(f"unknown value record {obj!r} in the plan")


def _prepare_subgraphs(obj):
    """Builds the GraphModules of embedded subgraphs once (they hold only op names)."""
    if isinstance(obj, list):
        for o in obj:
            _prepare_subgraphs(o)
    elif isinstance(obj, dict):
        if "graph" in obj and "_module" not in obj:
            obj["_module"] = module_from_json(obj["graph"], {})
        for v in obj.values():
            if isinstance(v, (list, dict)) and v is not obj.get("graph"):
                _prepare_subgraphs(v)


class AOTICompiledModel:
    """A loaded AOT package: call it with the program's user inputs (PyTorch's ``AOTICompiledModel``)."""

    def __init__(self, library_path: str, metadata: dict | None = None):
        self._lib = ctypes.CDLL(library_path)
        self._plan = json.loads(_blob(self._lib, "ember_aoti_plan"))
        if self._plan.get("version") != 1:
            raise SerializationError(f"this ember reads AOT plans of version 1, the package has "
                                     f"{self._plan.get('version')}")
        from ember.serialization import safetensors

        self._weights = safetensors.load(_blob(self._lib, "ember_aoti_weights"))
        for alias, key in self._plan.get("weight_aliases", {}).items():
            self._weights[alias] = self._weights[key]
        self._metadata = metadata or {}
        self._in_spec = pytree.spec_from_json(self._plan["in_spec"]) if self._plan["in_spec"] else None
        self._out_spec = pytree.spec_from_json(self._plan["out_spec"]) if self._plan["out_spec"] else None
        self._kernels = {}
        self._steps = []
        for step in self._plan["steps"]:
            if "kernel" in step:
                fn = getattr(self._lib, step["kernel"])
                fn.argtypes = [ctypes.c_void_p if kind == "ptr" else ctypes.c_int64 for kind, _ in step["args"]]
                fn.restype = None
                self._steps.append(("kernel", fn, step["args"]))
            elif "alloc" in step:
                self._steps.append(("alloc", step["alloc"], tuple(step["shape"]), _dtype(step["dtype"])))
            else:
                _prepare_subgraphs(step)
                self._steps.append(("extern", resolve_target(step["extern"]), step))
        self._lifted_names = [b["name"] if b else None for b in self._plan["inputs"][:self._plan["n_lifted"]]]

    def get_metadata(self) -> dict:
        return dict(self._metadata)

    def get_constant_fqns(self) -> list:
        return list(self._plan["lifted_targets"])

    def load_constants(self, constants_map: dict, *, check_full_update: bool, user_managed: bool = False) -> None:
        """Replaces weights by fully qualified name (same shapes and dtypes)."""
        targets = self._plan["lifted_targets"]
        if check_full_update and set(constants_map) != set(targets):
            missing = sorted(set(targets) - set(constants_map))
            raise RuntimeError(f"load_constants: missing constants {missing}")
        for target, name in zip(targets, self._lifted_names):
            if target in constants_map and name is not None:
                old = self._weights[f"input:{name}"]
                new = constants_map[target]
                if tuple(new.shape) != tuple(old.shape) or new.dtype != old.dtype:
                    raise RuntimeError(f"load_constants: {target} must be {tuple(old.shape)} {old.dtype}")
                self._weights[f"input:{name}"] = new.detach().contiguous()

    def _bind_inputs(self, args, kwargs) -> list:
        flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        if self._in_spec is not None and spec != self._in_spec:
            raise ValueError(f"the inputs do not match the compiled program's structure:\n{self._in_spec}\ngot\n{spec}")
        return [x for x in flat if isinstance(x, Tensor)]

    def __call__(self, *args, **kwargs):
        user = self._bind_inputs(args, kwargs)
        specs = self._plan["inputs"]
        n_lifted = self._plan["n_lifted"]
        if len(user) != len(specs) - n_lifted:
            raise RuntimeError(f"expected {len(specs) - n_lifted} tensor inputs, got {len(user)}")
        env = {}
        for name in self._plan["constants"]:
            env[name] = self._weights[f"const:{name}"]
        for i, spec in enumerate(specs):
            if spec is None:
                continue
            if i < n_lifted:
                env[spec["name"]] = self._weights[f"input:{spec['name']}"]
                continue
            x = user[i - n_lifted]
            dtype = _dtype(spec["dtype"])
            if x.dtype != dtype or tuple(x.shape) != tuple(spec["shape"]) or x.device.type != "cpu":
                raise RuntimeError(
                    f"input {i - n_lifted}: the package was compiled for a cpu tensor of shape {tuple(spec['shape'])} "
                    f"and dtype {dtype}, got {tuple(x.shape)} {x.dtype} on {x.device}")
            if tuple(x.stride()) != tuple(spec["strides"]):
                x = x.contiguous()
                if tuple(x.stride()) != tuple(spec["strides"]):
                    x = make_tensor(x._storage, x._shape, tuple(spec["strides"]), 0, x.dtype, CPU).copy_(x)
            env[spec["name"]] = x.detach()
        with ember.no_grad():
            for step in self._steps:
                kind = step[0]
                if kind == "alloc":
                    env[step[1]] = new_empty_tensor(step[2], step[3], CPU)
                elif kind == "kernel":
                    _, fn, args_spec = step
                    fn(*[env[what].data_ptr() if k == "ptr" else what for k, what in args_spec])
                else:
                    _, fn, rec = step
                    result = fn(*_decode(rec["args"], env), **{k: _decode(v, env) for k, v in rec["kwargs"].items()})
                    out = rec["out"]
                    if isinstance(out, list):
                        for name, value in zip(out, result):
                            if name is not None:
                                env[name] = _contiguous(value)
                    elif out is not None:
                        env[out] = _contiguous(result)
            outputs = _decode(self._plan["outputs"], env)
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        user_out = [outputs[i] for i in self._plan["user_outputs"]]
        return pytree.tree_unflatten(user_out, self._out_spec) if self._out_spec is not None else user_out


def _contiguous(t):
    if isinstance(t, Tensor) and t._stride != contiguous_strides(t._shape) and 0 not in t._shape:
        return t.contiguous()
    return t


def aoti_load_package(path, run_single_threaded: bool = False, device_index: int = -1) -> AOTICompiledModel:
    """Loads a package written by ``aoti_compile_and_package`` (a path or a binary file object)."""
    try:
        z = zipfile.ZipFile(path if not isinstance(path, (str, os.PathLike)) else os.fspath(path))
    except zipfile.BadZipFile as exc:
        raise SerializationError(f"{path!r} is not an AOT package (not a zip archive)") from exc
    with z:
        names = set(z.namelist())
        if _PREFIX + "version" not in names or _PREFIX + "model.so" not in names:
            raise SerializationError("not an ember AOT package: ember_aoti/version or model.so missing")
        version = z.read(_PREFIX + "version").decode()
        if version.split(".")[0] != PACKAGE_VERSION.split(".")[0]:
            raise SerializationError(f"this ember reads AOT packages {PACKAGE_VERSION}, the file is {version}")
        metadata = json.loads(z.read(_PREFIX + "metadata.json")) if _PREFIX + "metadata.json" in names else {}
        if metadata.get("runtime") == "c":
            from ._aoti_cmodel import CModel

            return CModel.from_zip(z, _PREFIX, metadata)
        library = z.read(_PREFIX + "model.so")
    return load_library_bytes(library, metadata)


def load_library_bytes(library: bytes, metadata: dict | None = None) -> AOTICompiledModel:
    fd, so_path = tempfile.mkstemp(suffix=".so", prefix="ember-aoti-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(library)
        return AOTICompiledModel(so_path, metadata)
    finally:
        os.unlink(so_path)  # dlopen keeps the mapping; the name is not needed any more


def aot_load(so_path: str, device: str = "cpu") -> AOTICompiledModel:
    """Loads a library written by ``ember._export.aot_compile`` (PyTorch's ``torch._export.aot_load``)."""
    if str(device).split(":")[0] != "cpu":
        raise RuntimeError(f"ember's AOT libraries run on the cpu, not {device}")
    return AOTICompiledModel(os.fspath(so_path))
