"""``ember.cuda.make_graphed_callables``: functions and modules whose forward and backward each
replay one CUDA graph.

For every callable: a few warm-up iterations on a side stream (kernels compiled, the
allocator's pools filled), a capture of the forward on its sample arguments, then a capture
of the backward (``autograd.grad`` of the outputs with respect to the tensor arguments that
require grad and the module's parameters, from static gradient buffers). All graphs share
one memory pool: forwards are captured in order and backwards in reverse order, the order a
training step replays them. Calling the result copies the arguments into the static inputs,
replays the forward and returns the static outputs through an autograd ``Function`` whose
backward copies the incoming gradients into the static buffers and replays the backward.

The autograd engine is ember-autograd's, reached through the core's plugin registry (this
package depends only on the tensor core); without it the call raises naming the package.
"""

from __future__ import annotations

from . import _graphs
from ._streams import Stream, current_stream, stream


def _autograd():
    import sys

    from ember._src import plugins

    if plugins.load("autograd") is None or "ember.autograd" not in sys.modules:
        raise RuntimeError("make_graphed_callables needs ember-autograd (pip install ember-autograd)")
    return sys.modules["ember.autograd"]


def _is_module(c) -> bool:
    return hasattr(c, "parameters") and hasattr(c, "_forward_hooks") and callable(getattr(c, "forward", None))


def _flat_outputs(out):
    if isinstance(out, (tuple, list)):
        return tuple(out), True
    return (out,), False


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False,
                           pool=None):
    from ember._src.tensor import Tensor

    ag = _autograd()
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError("make_graphed_callables: callables and sample_args must have the same length")
    for c, args in zip(callables, sample_args):
        if not isinstance(args, tuple) or not all(isinstance(a, Tensor) for a in args):
            raise TypeError("In the beta API, sample_args for each callable must contain only Tensors. "
                            "Other types are not allowed.")
        if _is_module(c) and (c._forward_hooks or c._forward_pre_hooks or getattr(c, "_backward_hooks", None)):
            raise RuntimeError("Modules must not have hooks registered at the time they are passed. However, "
                               "registering hooks on modules after passing them through make_graphed_callables "
                               "is allowed.")
        if any(a.requires_grad and not a.is_leaf for a in args):
            raise RuntimeError("In CUDA graph capture, sample_args that require grad must be leaf tensors "
                               "(detach them and set requires_grad_())")
    params = [tuple(c.parameters()) if _is_module(c) else () for c in callables]
    static_inputs = [tuple(args) + p for args, p in zip(sample_args, params)]
    mempool = _graphs.graph_pool_handle() if pool is None else pool
    side = Stream()
    side.wait_stream(current_stream())

    def grads_of(outputs, inputs, grad_outputs):
        outs = [o for o in outputs if isinstance(o, Tensor) and o.requires_grad]
        ins = [i for i in inputs if i.requires_grad]
        gouts = [g for o, g in zip(outputs, grad_outputs) if isinstance(o, Tensor) and o.requires_grad]
        if not outs or not ins:
            return [None] * len(inputs)
        got = iter(ag.grad(outs, ins, grad_outputs=gouts, allow_unused=allow_unused_input))
        return [next(got) if i.requires_grad else None for i in inputs]

    with stream(side):
        for c, args, inputs in zip(callables, sample_args, static_inputs):
            for _ in range(num_warmup_iters):
                outs, _ = _flat_outputs(c(*args))
                grads_of(outs, inputs, [o.new_ones(o.shape) if isinstance(o, Tensor) else None for o in outs])
    current_stream().wait_stream(side)

    fwd_graphs = [_graphs.CUDAGraph() for _ in callables]
    bwd_graphs = [_graphs.CUDAGraph() for _ in callables]
    static_outputs, was_seq = [], []
    for c, args, g in zip(callables, sample_args, fwd_graphs):
        with _graphs.graph(g, pool=mempool):
            outs, seq = _flat_outputs(c(*args))
        static_outputs.append(outs)
        was_seq.append(seq)
    static_grad_outputs, static_grad_inputs = [None] * len(callables), [None] * len(callables)
    for i in reversed(range(len(callables))):
        gouts = [o.new_empty(o.shape) if isinstance(o, Tensor) and o.requires_grad else None
                 for o in static_outputs[i]]
        with _graphs.graph(bwd_graphs[i], pool=mempool):
            grads = grads_of(static_outputs[i], static_inputs[i], gouts)
        static_grad_outputs[i], static_grad_inputs[i] = gouts, grads

    results = []
    for i, c in enumerate(callables):
        fn = _graphed(ag.Function, fwd_graphs[i], bwd_graphs[i], static_inputs[i], static_outputs[i],
                      static_grad_outputs[i], static_grad_inputs[i], len(sample_args[i]), params[i], was_seq[i])
        if _is_module(c):
            c.forward = _module_forward(c, fn)
            results.append(c)
        else:
            results.append(fn)
    return results[0] if just_one else tuple(results)


def _module_forward(module, graphed):
    eager = module.forward

    def forward(*args):
        # A graph is captured for one training mode: the other mode runs the module eagerly.
        return graphed(*args) if module.training == graphed.training else eager(*args)

    graphed.training = module.training
    return forward


def _graphed(function_cls, fwd, bwd, static_inputs, static_outputs, static_grad_outputs, static_grad_inputs,
             n_user, params, was_seq):
    class Graphed(function_cls):
        @staticmethod
        def forward(ctx, *inputs):
            for dst, src in zip(static_inputs[:n_user], inputs[:n_user]):
                if dst.data_ptr() != src.data_ptr():
                    dst.copy_(src)
            fwd.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        def backward(ctx, *grads):
            for dst, g in zip(static_grad_outputs, grads):
                if dst is not None and g is not None and dst.data_ptr() != g.data_ptr():
                    dst.copy_(g)
            bwd.replay()
            return tuple(None if g is None else g.detach() for g in static_grad_inputs)

    def functionalized(*user_args):
        if len(user_args) != n_user:
            raise TypeError(f"the graphed callable takes {n_user} tensor arguments, got {len(user_args)}")
        out = Graphed.apply(*(tuple(user_args) + params))
        out = out if isinstance(out, tuple) else (out,)
        return out if was_seq else out[0]

    return functionalized
