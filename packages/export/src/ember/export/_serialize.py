"""``ember.export.save`` / ``load``: an exported program as a zip of JSON and safetensors.

The archive (format documented in ``packages/export/SCHEMA.md``) holds

- ``ember_export/version``: the schema version, ``"<major>.<minor>"``;
- ``ember_export/program.json``: the graph (one record per node), the signature, range
  constraints, input/output tree specs and the module call graph;
- ``ember_export/weights.safetensors``: parameters, buffers and constants, by target name;
- ``ember_export/example_inputs.safetensors``: the flattened example inputs, when present.

Loading executes nothing from the file: no pickle, no ``eval``. Node targets are resolved
by name, only from ember's op table (``ember.ops.<name>``) and a fixed allow-list of Python
operators, and sympy expressions are parsed by ``sympy.parse_expr`` with an empty namespace
after a character check. A reader accepts files of its major version and any minor version
up to its own.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

import sympy

from ember.serialization import safetensors

from . import _pytree as pytree
from ._graph_json import SerializationError, graph_to_json, module_from_json, sym_from_text
from ._program import ExportedProgram, ModuleCallEntry, ModuleCallSignature
from ._ranges import ValueRange, as_expr
from ._signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)

SCHEMA_VERSION = (1, 1)  # 1.1: subgraphs of cond/while_loop inside get_attr records
_PREFIX = "ember_export/"
# What a load may inflate, each member and all read members together: the archive's own size
# (``save`` stores members uncompressed, so a real program inflates to about its file) plus
# this slack for a member someone deflated. A deflated run of zeros grows ~1000x: a few MB
# of file must not become gigabytes of memory.
_INFLATE_SLACK = 256 << 20


# ------------------------------------------------------------------ signature


def _arg_to_json(arg) -> dict:
    if isinstance(arg, TensorArgument):
        return {"tensor": arg.name}
    if isinstance(arg, SymIntArgument):
        return {"sym_int": arg.name}
    if isinstance(arg, ConstantArgument):
        if not (arg.value is None or isinstance(arg.value, (bool, int, float, str))):
            raise SerializationError(f"cannot serialize the constant input {arg.name}={arg.value!r}")
        return {"constant": {"name": arg.name, "value": arg.value}}
    raise SerializationError(f"unknown argument spec {arg!r}")


def _arg_from_json(obj: dict):
    if "tensor" in obj:
        return TensorArgument(obj["tensor"])
    if "sym_int" in obj:
        return SymIntArgument(obj["sym_int"])
    if "constant" in obj:
        return ConstantArgument(obj["constant"]["name"], obj["constant"]["value"])
    raise SerializationError(f"unknown argument record {obj!r}")


def _signature_to_json(sig: ExportGraphSignature) -> dict:
    return {
        "inputs": [{"kind": s.kind.name, "arg": _arg_to_json(s.arg), "target": s.target,
                    "persistent": s.persistent} for s in sig.input_specs],
        "outputs": [{"kind": s.kind.name, "arg": _arg_to_json(s.arg), "target": s.target}
                    for s in sig.output_specs],
    }


def _signature_from_json(obj: dict) -> ExportGraphSignature:
    inputs = [InputSpec(InputKind[s["kind"]], _arg_from_json(s["arg"]), s["target"], s.get("persistent"))
              for s in obj["inputs"]]
    outputs = [OutputSpec(OutputKind[s["kind"]], _arg_from_json(s["arg"]), s["target"]) for s in obj["outputs"]]
    return ExportGraphSignature(inputs, outputs)


def _call_graph_to_json(entries: list[ModuleCallEntry]) -> list:
    out = []
    for e in entries:
        sig = None
        if e.signature is not None:
            s = e.signature
            sig = {"in_spec": pytree.spec_to_json(s.in_spec) if s.in_spec is not None else None,
                   "out_spec": pytree.spec_to_json(s.out_spec) if s.out_spec is not None else None,
                   "forward_arg_names": s.forward_arg_names}
            if s.inputs or s.outputs:  # a preserved call signature's graph values
                sig["inputs"] = [_arg_to_json(a) for a in s.inputs]
                sig["outputs"] = [_arg_to_json(a) for a in s.outputs]
        out.append({"fqn": e.fqn, "signature": sig})
    return out


def _call_graph_from_json(entries: list) -> list[ModuleCallEntry]:
    out = []
    for e in entries:
        sig = e.get("signature")
        if sig is not None:
            in_spec = pytree.spec_from_json(sig["in_spec"]) if sig.get("in_spec") is not None else None
            out_spec = pytree.spec_from_json(sig["out_spec"]) if sig.get("out_spec") is not None else None
            sig = ModuleCallSignature([_arg_from_json(a) for a in sig.get("inputs", [])],
                                      [_arg_from_json(a) for a in sig.get("outputs", [])],
                                      in_spec, out_spec, sig.get("forward_arg_names"))
        out.append(ModuleCallEntry(e["fqn"], sig))
    return out


# ------------------------------------------------------------------ weights


def _tensors_to_bytes(tensors: dict) -> tuple[bytes, dict]:
    """safetensors bytes of the distinct tensors, and {name: name it aliases} for tied ones."""
    unique, aliases, seen = {}, {}, {}
    for name, t in tensors.items():
        key = (id(t),)
        if key in seen:
            aliases[name] = seen[key]
            continue
        seen[key] = name
        unique[name] = t.detach().contiguous().clone()
    return safetensors.save(unique), aliases


def _tensors_from_bytes(data: bytes, aliases: dict) -> dict:
    tensors = safetensors.load(data)
    for name, source in aliases.items():
        tensors[name] = tensors[source]
    return tensors


# ------------------------------------------------------------------ save / load


def save(ep: ExportedProgram, f, *, extra_files: dict | None = None, opset_version: dict | None = None,
         pickle_protocol: int = 2) -> None:
    """Writes ``ep`` to a path or a binary file-like object (atomically for paths)."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"The 'ep' parameter must be an instance of 'ExportedProgram', got '{type(ep).__name__}' "
                        "instead.")
    graph_json, sym_names = graph_to_json(ep.graph, ep.graph_module)
    in_spec, out_spec = ep.call_spec
    sig = ep.graph_signature
    requires_grad = {name: bool(t.requires_grad) for name, t in ep.state_dict.items()}
    program = {
        "schema": "ember.export",
        "schema_version": list(SCHEMA_VERSION),
        "graph": graph_json,
        "signature": _signature_to_json(sig),
        "range_constraints": {str(k): {"min": v.lower, "max": v.upper} for k, v in ep.range_constraints.items()},
        "module_call_graph": _call_graph_to_json(ep.module_call_graph),
        "in_spec": pytree.spec_to_json(in_spec) if in_spec is not None else None,
        "out_spec": pytree.spec_to_json(out_spec) if out_spec is not None else None,
        "state_dict_keys": list(ep.state_dict),
        "constant_keys": list(ep.constants),
        "parameters_requires_grad": requires_grad,
        "symbols": sym_names,
        "dialect": ep.dialect,
        # Dim.AUTO/DYNAMIC guards module() checks per call: [relation, lhs, rhs]
        "runtime_guards": [[type(g).__name__, str(g.lhs), str(g.rhs)] for g in ep._runtime_guards
                           if isinstance(g, sympy.core.relational.Relational)],
    }
    weights, aliases = _tensors_to_bytes({**ep.state_dict, **{f"constant:{k}": v for k, v in ep.constants.items()
                                                              if hasattr(v, "dtype")}})
    program["tensor_aliases"] = aliases
    example = None
    if ep.example_inputs is not None:
        leaves, _ = pytree.tree_flatten(ep.example_inputs)
        tensors = {f"input_{i}": x for i, x in enumerate(leaves) if hasattr(x, "dtype")}
        if len(tensors) == len(leaves):
            # one tensor passed twice (export(m, (x, x))) is written once and named again
            example, example_aliases = _tensors_to_bytes(tensors)
            program["example_inputs_spec"] = pytree.spec_to_json(pytree.tree_flatten(ep.example_inputs)[1])
            if example_aliases:
                program["example_inputs_aliases"] = example_aliases
    members = {
        _PREFIX + "version": f"{SCHEMA_VERSION[0]}.{SCHEMA_VERSION[1]}".encode(),
        _PREFIX + "program.json": json.dumps(program, separators=(",", ":")).encode(),
        _PREFIX + "weights.safetensors": weights,
    }
    if example is not None:
        members[_PREFIX + "example_inputs.safetensors"] = example
    for name, content in (extra_files or {}).items():
        members[_PREFIX + "extra/" + name] = content.encode() if isinstance(content, str) else bytes(content)
    _write_zip(f, members)


def _write_zip(f, members: dict) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # identical programs, identical files
            z.writestr(info, data)
    data = buf.getvalue()
    if isinstance(f, (str, os.PathLike)):
        from ember.serialization._atomic import atomic_write

        with atomic_write(f) as out:
            out.write(data)
    else:
        f.write(data)


class BadZipFile(SerializationError, zipfile.BadZipFile):
    """A file that is no zip archive at all (truncated, garbage): also a ``zipfile.BadZipFile`` (and named so),
    the type PyTorch 2.13's ``torch.export.load`` raises there."""


def load(f, *, extra_files: dict | None = None, expected_opset_version: dict | None = None) -> ExportedProgram:
    """Reads a program written by :func:`save`; nothing in the file is executed.

    A file that is not such a program, or one damaged (truncated, edited, a CRC mismatch, JSON
    or safetensors that do not parse, a graph that does not hold together) raises
    SerializationError naming what failed; the partial read is discarded."""
    try:
        z = zipfile.ZipFile(f if not isinstance(f, (str, os.PathLike)) else os.fspath(f))
    except (zipfile.BadZipFile, EOFError, ValueError, OSError, NotImplementedError) as exc:
        # (NotImplementedError: a damaged header's "zip file version 14.7")
        if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        raise BadZipFile(f"File is not a zip file\n{f!r} is not an ember exported program") from exc
    try:
        return _load(z, extra_files)
    except SerializationError:
        raise
    except (Exception, RecursionError) as exc:  # anything else a damaged file can make the reader do
        name = f if isinstance(f, (str, os.PathLike)) else type(f).__name__
        raise SerializationError(f"cannot read the exported program {str(name)!r}: the file is damaged or not "
                                 f"written by ember.export.save ({type(exc).__name__}: {str(exc)[:300]})") from exc


class _Inflater:
    """Reads members of ``z`` while capping what they inflate to (each, and in total)."""

    def __init__(self, z):
        pos = z.fp.tell()
        self.archive = z.fp.seek(0, os.SEEK_END)
        z.fp.seek(pos)
        self.z = z
        self.left = self.archive + _INFLATE_SLACK

    def read(self, name: str) -> bytes:
        info = self.z.getinfo(name)
        limit = min(self.left, self.archive + _INFLATE_SLACK)
        if info.file_size > limit:
            self._refuse(name, info.file_size, limit)
        chunks, size = [], 0
        with self.z.open(info) as member:  # the header's size may lie: count what really comes out
            while chunk := member.read(min(1 << 20, limit - size + 1)):
                size += len(chunk)
                if size > limit:
                    self._refuse(name, size, limit)
                chunks.append(chunk)
        self.left -= size
        return b"".join(chunks)

    def _refuse(self, name: str, size: int, limit: int):
        raise SerializationError(
            f"{name}: inflates to {'at least ' if size == limit + 1 else ''}{size} bytes, more than the "
            f"{limit} this load allows (a {self.archive}-byte archive; ember.export.save stores members "
            "uncompressed): refused as a decompression bomb")


def _load(z, extra_files: dict | None) -> ExportedProgram:
    with z:
        names = set(z.namelist())
        reader = _Inflater(z)
        if _PREFIX + "version" not in names or _PREFIX + "program.json" not in names:
            pickled = sorted(n for n in names if n.endswith(".pkl"))
            if pickled:  # PyTorch's .pt2 / jit / torch.save archives: their pickles are never read here
                raise SerializationError(
                    f"not an ember exported program: ember_export/version or program.json missing; this archive "
                    f"holds pickles ({', '.join(pickled[:3])}), as PyTorch's torch.export/jit/torch.save files do, "
                    "which ember never unpickles here: export the model with ember.export and save it with "
                    "ember.export.save")
            if any(n.endswith("/archive_format") for n in names):
                raise SerializationError("not an ember exported program: this is a PyTorch .pt2 archive "
                                         "(torch.export.save); ember.export.load reads files of ember.export.save")
            raise SerializationError("not an ember exported program: ember_export/version or program.json missing")
        major, minor = (int(x) for x in reader.read(_PREFIX + "version").decode().split("."))
        if major != SCHEMA_VERSION[0] or minor > SCHEMA_VERSION[1]:
            raise SerializationError(f"this file uses export schema {major}.{minor}; this ember reads "
                                     f"{SCHEMA_VERSION[0]}.x up to {SCHEMA_VERSION[0]}.{SCHEMA_VERSION[1]}")
        program = json.loads(reader.read(_PREFIX + "program.json"))
        tensors = _tensors_from_bytes(reader.read(_PREFIX + "weights.safetensors"), program.get("tensor_aliases", {}))
        example = None
        if _PREFIX + "example_inputs.safetensors" in names:
            ex = _tensors_from_bytes(reader.read(_PREFIX + "example_inputs.safetensors"),
                                     program.get("example_inputs_aliases", {}))
            leaves = [ex[f"input_{i}"] for i in range(len(ex))]
            example = pytree.tree_unflatten(leaves, pytree.spec_from_json(program["example_inputs_spec"]))
        if extra_files is not None:
            for key in list(extra_files):
                member = _PREFIX + "extra/" + key
                extra_files[key] = reader.read(member).decode() if member in names else ""
    symbols = {name: sym_from_text(name) for name in program.get("symbols", [])}
    graph = module_from_json(program["graph"], symbols)
    state_dict = {}
    grads = program.get("parameters_requires_grad", {})
    for key in program["state_dict_keys"]:
        t = tensors[key]
        if grads.get(key):
            t.requires_grad_(True)
        state_dict[key] = t
    constants = {k: tensors[f"constant:{k}"] for k in program.get("constant_keys", []) if f"constant:{k}" in tensors}
    ranges = {sym_from_text(k, symbols): ValueRange(v["min"], v["max"])
              for k, v in program["range_constraints"].items()}
    call_graph = _call_graph_from_json(program["module_call_graph"])
    from ._verifier import verifier_of

    ep = ExportedProgram(None, graph, _signature_from_json(program["signature"]), state_dict, ranges, call_graph,
                         example_inputs=example, constants=constants,
                         verifiers=[verifier_of(program.get("dialect", "TRAINING"))])
    relations = {"Equality": sympy.Eq, "Unequality": sympy.Ne, "StrictLessThan": sympy.Lt, "LessThan": sympy.Le,
                 "StrictGreaterThan": sympy.Gt, "GreaterThan": sympy.Ge}
    ep._runtime_guards = tuple(relations[rel](sym_from_text(lhs, symbols), sym_from_text(rhs, symbols))
                               for rel, lhs, rhs in program.get("runtime_guards", []) if rel in relations)
    _check_consistent(ep)
    return ep


def _check_consistent(ep: ExportedProgram) -> None:
    """What ``ep.module()`` and a call read from the file, checked at load: the state the
    signature names, the root's call signature, a range for each symbol of the inputs' sizes."""
    for spec in ep.graph_signature.input_specs:
        if spec.kind is InputKind.PARAMETER or spec.kind is InputKind.BUFFER and spec.persistent:
            where = ep.state_dict
        elif spec.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            where = ep.constants
        else:
            continue
        if spec.target not in where:
            raise SerializationError(f"the signature names {spec.kind.name} {spec.target!r}, which the file does not "
                                     "hold")
    sig = ep.graph_signature
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    outputs = [n for n in ep.graph.nodes if n.op == "output"]
    if len(placeholders) != len(sig.input_specs) or len(outputs) != 1:
        raise SerializationError(f"the graph has {len(placeholders)} inputs and {len(outputs)} output nodes; its "
                                 f"signature names {len(sig.input_specs)} inputs and one output node")
    results = outputs[0].args[0] if outputs[0].args else None
    if len(results if isinstance(results, (list, tuple)) else [results]) != len(sig.output_specs):
        raise SerializationError(f"the graph's output node does not return the {len(sig.output_specs)} values its "
                                 "signature names")
    if not ep.module_call_graph or ep.module_call_graph[0].fqn != "" or ep.module_call_graph[0].signature is None:
        raise SerializationError("the module call graph has no root entry (fqn '') with a signature")
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        shape = getattr(node.meta.get("val"), "shape", ())
        for size in shape:
            expr = as_expr(size)
            if isinstance(expr, sympy.Expr) and not expr.free_symbols <= set(ep.range_constraints):
                raise SerializationError(f"the input {node.name!r} has the size {expr} with no range constraint")
