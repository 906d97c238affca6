"""AOT autograd: a captured graph compiled as a forward graph and a backward graph.

``aot_module_simplified(gm, example_inputs, fw_compiler, bw_compiler)`` (PyTorch's name and
signature) traces the joint forward+backward graph with ember's own derivative formulas
(``_aot_joint``), partitions it, compiles both halves and returns a callable that runs them
behind one autograd node, so ``loss.backward()`` after a compiled forward runs the compiled
backward.

Partition (a clear heuristic, not a min-cut): every node recorded while replaying the forward
is in the forward graph; every node recorded by the formulas is in the backward graph (so a
formula's recomputation, e.g. ``cos`` for ``sin``'s gradient, stays in the backward); the
forward values the backward reads, primal inputs included, are saved.

Double backward through a compiled region raises a RuntimeError that says to use
``backend="eager"``; graphs outside the scheme (in-place ops, grad-mode switches, ops with no
formula) run under eager autograd, op by op.
"""

from __future__ import annotations

import ember
from ember._src import grad_mode
from ember._src.tensor import Tensor

from ._aot_joint import _map, as_input_views, trace_joint
from .inductor import config

_GRAD = grad_mode.STATE


def partition(joint, n_outputs: int):
    """Splits ``joint`` (tagged by ``partitioner_tag``) into (forward gm, backward gm, saved count)."""
    from ember import fx

    nodes = list(joint.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    output = nodes[-1]
    fw_outs, input_grads = output.args[0]
    n_primals = len(placeholders) - sum(1 for _ in _tangent_nodes(placeholders, joint))
    primals, tangents = placeholders[:n_primals], placeholders[n_primals:]
    fw_set = set(primals)
    for n in nodes:
        if n.op == "call_function" and n.meta.get("partitioner_tag") == "is_forward":
            fw_set.add(n)
        elif n.op == "get_attr":
            fw_set.add(n)
    # Saved: forward values a backward node (or the gradient outputs) reads. A view the
    # backward reads (a weight's transpose, say) is not saved but taken again in the backward
    # from its saved base: a view costs nothing there, while a saved view of an input would
    # leave the compiled forward as a copy. A cast to a wider float dtype is taken again too:
    # GPT-2's bf16 logits cast to float32 for the loss were saved as 8192 x 50304 float32 (1.6 GB
    # written by the forward, read by the backward) where the bf16 matmul output is half that and
    # the cast fuses into the backward's kernel.
    saved: list = []
    recomputed: list = []
    seen: set = set()

    def note(a):
        if isinstance(a, fx.Node) and a in fw_set and a.op != "get_attr" and a not in seen:
            seen.add(a)
            if _static_view(a) or _widening_cast(a):
                note(a.args[0])
                recomputed.append(a)
            else:
                saved.append(a)
        return a

    for n in nodes:
        if n.op == "call_function" and n not in fw_set:
            _map(n.args, note)
            _map(n.kwargs, note)
    _map(tuple(input_grads), note)
    mutated = {n.args[0] for n in nodes if n.op == "call_function" and "inplace" in getattr(n.target, "tags", ())}
    if mutated & set(saved):
        raise _Unpartitionable("the backward reads a value the forward writes in place")

    fw = fx.Graph()
    env: dict = {}
    for p in primals:
        env[p] = fw.placeholder(p.name)
        env[p].meta.update(p.meta)
    for n in nodes:
        if n in fw_set and n.op != "placeholder":
            env[n] = _copy(fw, n, env)
    fw.output(tuple(env[a] for a in fw_outs) + tuple(env[s] for s in saved))

    bw = fx.Graph()
    benv: dict = {}
    for s in saved:
        benv[s] = bw.placeholder(s.name)
        benv[s].meta.update(s.meta)
    for t in tangents:
        benv[t] = bw.placeholder(f"tangents_{len(benv) - len(saved) + 1}")
        benv[t].meta.update(t.meta)
    for r in recomputed:  # after its base (noted first): a chain of views comes in order
        benv[r] = _copy(bw, r, benv)
    for n in nodes:
        if n.op == "get_attr":
            benv[n] = _copy(bw, n, benv)
        elif n.op == "call_function" and n not in fw_set:
            benv[n] = _copy(bw, n, benv)
    bw.output(tuple(benv[g] if isinstance(g, fx.Node) else g for g in input_grads))
    return fx.GraphModule(joint, fw), fx.GraphModule(joint, bw), len(saved)


def _static_view(node) -> bool:
    """A view op of one forward tensor whose other arguments are constants (no symbolic sizes)."""
    from ember import fx

    if node.op != "call_function" or "view" not in getattr(node.target, "tags", ()) or not node.args:
        return False
    rest = [*node.args[1:], *node.kwargs.values()]
    found = []
    _map(rest, lambda a: found.append(a) if isinstance(a, fx.Node) else a)
    return isinstance(node.args[0], fx.Node) and not found


def _widening_cast(node) -> bool:
    """``_to_copy`` of one forward tensor to a wider floating dtype on its own device (nothing
    else changed): cheaper to repeat from its input than to save."""
    from ember import fx

    if node.op != "call_function" or getattr(node.target, "name", None) != "_to_copy" or len(node.args) != 1:
        return False
    if not isinstance(node.args[0], fx.Node) or set(node.kwargs) - {"dtype", "device"}:
        return False
    src, out = node.args[0].meta.get("val"), node.meta.get("val")
    if not isinstance(src, Tensor) or not isinstance(out, Tensor):
        return False
    return src.dtype.is_floating_point and out.dtype.is_floating_point and src.device == out.device \
        and out.dtype.itemsize > src.dtype.itemsize


class _Unpartitionable(Exception):
    pass


def _tangent_nodes(placeholders, joint):
    return [p for p in placeholders if p.meta.get("ember_tangent")]


def _copy(graph, node, env):
    from ember import fx

    def sub(a):
        return env[a] if isinstance(a, fx.Node) else a

    if node.op == "get_attr":
        new = graph.get_attr(node.target)
    else:
        new = graph.call_function(node.target, _map(node.args, sub), _map(node.kwargs, sub))
    new.meta.update(node.meta)
    return new


def aot_module_simplified(mod, args, fw_compiler, bw_compiler=None, partition_fn=None, decompositions=None,
                          keep_inference_input_mutations: bool = False, inference_compiler=None, **unused):
    """Compiles ``mod`` (a GraphModule) for ``args`` as forward + backward graphs (module docstring)."""
    bw_compiler = bw_compiler or fw_compiler
    inference_compiler = inference_compiler or fw_compiler
    example_inputs = list(args)
    if not any(isinstance(t, Tensor) and t.requires_grad for t in example_inputs):
        return _tupled(inference_compiler(mod, example_inputs))
    inference_box: list = []

    def inference(*inputs):
        # Compiled on first use only (a call under no_grad), as PyTorch: a training graph's
        # forward compiler runs once, for the forward graph.
        if not inference_box:
            inference_box.append(_tupled(inference_compiler(mod, example_inputs)))
        return inference_box[0](*inputs)

    if any(not isinstance(t, Tensor) for t in example_inputs):
        # Symbolic sizes: the formulas would bake this call's sizes into the backward graph.
        return _tupled(mod.forward)
    traced = trace_joint(mod, example_inputs)
    if traced is None:
        return _tupled(mod.forward)  # eager autograd, op by op
    joint, n_outputs, _, needs, diff_outputs, n_tangents = traced
    # Mark the tangent placeholders (the last n_tangents) for the partition.
    placeholders = [n for n in joint.graph.nodes if n.op == "placeholder"]
    for p in placeholders[len(placeholders) - n_tangents:]:
        p.meta["ember_tangent"] = True
    try:
        fw_gm, bw_gm, n_saved = partition(joint, n_outputs)
    except _Unpartitionable:
        return _tupled(mod.forward)
    fw = _tupled(fw_compiler(fw_gm, example_inputs))
    bw_examples = [n.meta.get("val") for n in bw_gm.graph.nodes if n.op == "placeholder"]
    bw = _boxed(bw_compiler(bw_gm, bw_examples))
    function = _autograd_function(fw, bw, n_outputs, needs, diff_outputs, len(example_inputs))
    views = getattr(joint, "ember_output_views", None)

    def run(*inputs):
        if not _GRAD.grad_enabled:
            return inference(*inputs)
        outs = function.apply(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        # an output viewing an input: that view, made here under autograd (_aot_joint._output_views)
        return as_input_views(outs, inputs, views) if views else outs

    run.fw_module, run.bw_module = fw_gm, bw_gm
    return run


def _tupled(fn):
    def call(*inputs):
        out = fn(*inputs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    return call


def _boxed(fn):
    """``fn`` called with one list of inputs that the call empties (PyTorch's boxed convention): a
    compiled graph with a ``boxed_call`` takes the list itself and drops each input after its last
    use; any other callable gets the inputs unpacked (they live until it returns)."""
    boxed = getattr(fn, "boxed_call", None)
    if boxed is not None:
        def call(args):
            out = boxed(args)
            return tuple(out) if isinstance(out, (tuple, list)) else (out,)
    else:
        def call(args):
            inputs = tuple(args)
            args.clear()
            out = fn(*inputs)
            return tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return call


def _outside_capture(fn, args):
    """Runs a compiled backward for real. A ``loss.backward()`` inside a compiled function runs
    it while that function's capture records: its kernels read their inputs' data, so the ops
    pending before it run first and the capture lets the compiled code's own ops through."""
    from ._recorder import current

    rec = current()
    if rec is None or rec.suspended:
        return fn(*args)
    rec.flush(None)
    rec.went_eager = True
    rec.suspended = True
    try:
        return fn(*args)
    finally:
        rec.suspended = False


def _autograd_function(fw, bw, n_outputs, needs, diff_outputs, n_inputs):
    class CompiledFunction(ember.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            with ember.no_grad():
                outs = fw(*inputs)
            results, saved = outs[:n_outputs], outs[n_outputs:]
            ctx.save_for_backward(*saved)
            ctx.mark_non_differentiable(*[o for o, d in zip(results, diff_outputs) if not d and isinstance(o, Tensor)])
            return tuple(results)

        @staticmethod
        def backward(ctx, *grads):
            if _GRAD.grad_enabled:
                raise RuntimeError(
                    "double backward (create_graph=True) through a region compiled with AOT autograd is not "
                    "supported: compile it with backend='eager' to differentiate its backward"
                )
            tangents = [g for g, d in zip(grads, diff_outputs) if d]
            if any(t is None for t in tangents):
                raise RuntimeError("a compiled backward got no gradient for an output (set_materialize_grads(False)?)")
            args = [*ctx.saved_tensors, *tangents]
            del tangents
            if config.release_saved_tensors:
                # The list is then the only holder of the saved activations (unless the graph is
                # retained): the compiled backward empties it and drops each one after its last
                # read, as eager autograd frees a node's saved values when the node has run, so
                # the backward's peak is not every activation plus every gradient.
                ctx.maybe_clear_saved_tensors()
            input_grads = _outside_capture(bw, (args,))
            out = [None] * n_inputs
            for i, g in zip(needs, input_grads):
                out[i] = g
            return tuple(out)

    return CompiledFunction


def aot_function(fn, fw_compiler, bw_compiler=None, partition_fn=None, decompositions=None, **unused):
    """``aot_function(fn, fw_compiler)(*args)``: captures ``fn`` whole (make_fx), then as aot_module_simplified."""
    from ._make_fx import make_fx

    cache: dict = {}

    def run(*args):
        key = tuple((t.dtype, t._device, t._shape, t._requires_grad) if isinstance(t, Tensor) else (type(t), t)
                    for t in args)
        compiled = cache.get(key)
        if compiled is None:
            # the graph takes the tensors; other arguments are constants of it (the key holds them)
            tensors = [a for a in args if isinstance(a, Tensor)]

            def over_tensors(*ts, _args=args):
                it = iter(ts)
                return fn(*[next(it) if isinstance(a, Tensor) else a for a in _args])

            gm = make_fx(over_tensors, decomposition_table=decompositions)(*tensors)
            compiled = aot_module_simplified(gm, tensors, fw_compiler, bw_compiler)
            cache[key] = compiled
        outs = compiled(*[a for a in args if isinstance(a, Tensor)])
        return outs[0] if len(outs) == 1 else outs

    return run


aot_module = aot_module_simplified

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "partition"]
