"""Carrying node meta (source lines, module stacks) from old nodes to the nodes a pass makes.

Inside ``preserve_node_meta()``, a pass that runs ``with set_current_meta(old_node):`` while
creating nodes through a tracer (``create_proxy``) gets the provenance fields of
``old_node.meta`` copied onto each new node, as with ``torch.fx.traceback``. Transformer
does this for every node it re-records.
"""

from __future__ import annotations

import threading
import traceback as _py_traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["format_stack", "get_current_meta", "has_preserved_node_meta", "preserve_node_meta",
           "set_current_meta", "set_stack_trace"]

# The meta fields that describe where a value came from (not the value itself).
PRESERVED_FIELDS = ("stack_trace", "nn_module_stack", "source_fn_stack", "original_aten", "recompute",
                    "ac_graph_id", "has_backward_hook", "from_node", "quantization_tag", "custom",
                    "partitioner_tag", "seq_nr")


class _State(threading.local):
    def __init__(self) -> None:
        self.preserve = False
        self.current_meta: dict[str, Any] = {}


_STATE = _State()


@contextmanager
def preserve_node_meta(enable: bool = True) -> Iterator[None]:
    """Within the block, nodes created by tracers copy the current meta (``set_current_meta``)."""
    saved_preserve, saved_meta = _STATE.preserve, _STATE.current_meta
    try:
        _STATE.preserve = enable
        _STATE.current_meta = {}
        yield
    finally:
        _STATE.preserve, _STATE.current_meta = saved_preserve, saved_meta


def has_preserved_node_meta() -> bool:
    return _STATE.preserve


@contextmanager
def set_current_meta(node: Any, pass_name: str = "") -> Iterator[None]:
    """Makes ``node.meta`` the meta new nodes inherit, for the duration of the block."""
    if not (_STATE.preserve and node.meta):
        yield
        return
    saved = _STATE.current_meta
    try:
        meta = dict(node.meta)
        meta["from_node"] = [(node.name, pass_name)]
        _STATE.current_meta = meta
        yield
    finally:
        _STATE.current_meta = saved


def get_current_meta() -> dict[str, Any]:
    return _STATE.current_meta


def set_stack_trace(stack: list[str]) -> None:
    """Sets the stack trace new nodes inherit (while meta is preserved)."""
    if _STATE.preserve and stack:
        _STATE.current_meta = {**_STATE.current_meta, "stack_trace": "".join(stack)}


def format_stack() -> list[str]:
    """The current meta's stack trace as lines, or the Python stack when there is none."""
    if _STATE.preserve and _STATE.current_meta.get("stack_trace"):
        return [_STATE.current_meta["stack_trace"]]
    return _py_traceback.format_list(_py_traceback.extract_stack()[:-1])


def copy_preserved_meta(node: Any) -> None:
    """Copies the current meta's provenance fields onto a newly created node."""
    if not _STATE.preserve:
        return
    current = _STATE.current_meta
    for field in PRESERVED_FIELDS:
        if field in current and field not in node.meta:
            node.meta[field] = current[field]
