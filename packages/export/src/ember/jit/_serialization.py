"""``ember.jit.save`` / ``load``: the ember.export archive; loading runs no Python from the file.

A saved ScriptModule is its exported program (graph JSON + safetensors weights, see
ember.export's schema) plus ``extra_files``. ``load`` returns a ScriptModule running that
graph. What cannot be saved: modules whose forward reads tensor data to decide control
flow, and methods other than ``forward`` (``@ember.jit.export`` methods run only in the
original process).
"""

from __future__ import annotations

import ember.export as _export

from ._script_module import RecursiveScriptModule, ScriptFunction, ScriptModule


def save(m, f, _extra_files=None) -> None:
    if isinstance(m, ScriptFunction):
        m = m._module
    if not isinstance(m, ScriptModule):
        raise TypeError(f"ember.jit.save expects a ScriptModule (from ember.jit.script or trace), got "
                        f"{type(m).__name__}")
    ep = getattr(m, "_exported", None) or m.exported_program()
    _export.save(ep, f, extra_files=_extra_files)


def load(f, map_location=None, _extra_files=None, _restore_shapes: bool = False) -> ScriptModule:
    import zipfile

    try:
        ep = _export.load(f, extra_files=_extra_files)
    except zipfile.BadZipFile as exc:
        # PyTorch's archive reader fails with a RuntimeError on a file that is no archive
        raise RuntimeError(f"PytorchStreamReader failed reading zip archive: failed finding central directory "
                           f"({str(exc).splitlines()[-1]})") from exc
    module = ep.module()
    loaded = RecursiveScriptModule(module, ep.example_inputs, module)
    object.__setattr__(loaded, "_exported", ep)
    return loaded
