"""The backward engine: runs a graph's nodes in dependency order.

One pass counts, for every node reachable from the roots, how many edges lead into it; a
node runs once all of them delivered (ready nodes go highest sequence number first, as in
PyTorch, so the most recent op runs first). Gradients for a node's outputs are summed in
its input buffer. Unless ``retain_graph``, a node drops its saved tensors right after it ran.
"""

from __future__ import annotations

import heapq
import sys

from ember import _C
from ember._src import grad_mode
from ember._src.dispatch import sync_pending
from ember._src.layouts import strided
from ember._src.ops.creation.buffers import empty_strided
from ember._src.ops.creation.factories import ones_like, zeros_like
from ember._src.shapes import is_contiguous, is_non_overlapping_and_dense
from ember._src.tensor import Tensor

from . import anomaly_mode, graph
from .grad_mode import _LAYOUT_POLICY
from .graph import AccumulateGrad, GradientEdge, Node, get_gradient_edge, output_nr

_STATE = grad_mode.STATE


class GraphRoot(Node):
    """Feeds the root gradients to the roots' edges."""

    __slots__ = ("_grads",)

    def __init__(self, edges, grads):
        super().__init__(tuple(edges), 0)
        self._seq = 1 << 63
        self._grads = list(grads)

    def apply(self, grads):
        return self._grads


# -- gradient fix-up and accumulation ---------------------------------------------------------


def _invalid(node, idx, g, shape):
    return RuntimeError(
        f"Function {node.name()} returned an invalid gradient at index {idx} - got {list(g._shape)} but expected "
        f"shape compatible with {list(shape)}"
    )


def sum_to(g: Tensor, shape: tuple, node=None, idx: int = 0) -> Tensor:
    """Sums a broadcast gradient down to ``shape`` (the input's shape)."""
    gshape = g._shape
    lead = len(gshape) - len(shape)
    if lead < 0:
        raise _invalid(node, idx, g, shape)
    dims = list(range(lead))
    for i, s in enumerate(shape):
        gs = gshape[lead + i]
        if s != gs:
            if s != 1:
                raise _invalid(node, idx, g, shape)
            dims.append(lead + i)
    if dims:
        if len(dims) == lead and not _STATE.grad_enabled:
            return g.sum(dims)  # only leading dims (a bias's gradient): already the shape, no view to make
        g = g.sum(dims, keepdim=True)
    return g.reshape(shape) if lead else g


def fix_grad(g, meta, node, idx):
    """Makes a formula's gradient fit its input: broadcast reduction and dtype cast."""
    if not isinstance(g, Tensor):
        raise TypeError(f"Function {node.name()} returned a gradient of type {type(g).__name__} at index {idx}")
    shape, dtype = meta
    if g._shape != shape:
        g = sum_to(g, shape, node, idx)
    if g.dtype is not dtype:
        if g.dtype.is_complex and not dtype.is_complex:
            g = g.real  # a real input of a complex-valued call (PyTorch's handle_r_to_c)
        g = g.to(dtype)
    return g


def _stealable(g: Tensor, variable: Tensor, owned: bool) -> bool:
    """Whether AccumulateGrad may keep ``g`` itself as ``variable.grad``: nobody else holds it
    (``owned``: the engine's input buffer held its only reference, see AccumulateGrad.apply) or its
    memory, and (unless ``enforce_grad_layout_policy(False)``) it obeys the layout contract."""
    if not owned or type(g) is not Tensor or g.grad_fn is not None:
        return False
    # enforce_grad_layout_policy()'s flag, read here rather than through grad_mode (a frame per accumulation)
    if getattr(_LAYOUT_POLICY, "enabled", True) and not _obeys_layout_contract(g, variable):
        return False
    # The counts below are of references from objects and this frame only (no Python call in
    # between), so they do not depend on whether the interpreter inlines calls.
    base = g._base
    if base is None:
        return g._offset == 0 and sys.getrefcount(g._storage) <= 2
    # A view of a base that only it holds and that it covers (a reshaped matmul result, an
    # expanded scalar): the base is referenced by the view, the local and the argument.
    if sys.getrefcount(base) > 3 or sys.getrefcount(g._storage) > 3 or base.numel() > g.numel():
        return False
    g._base = None
    return True


# Note [Gradient layout contract] (PyTorch's AccumulateGrad): a leaf's first gradient has the
# leaf's strides when the leaf is non-overlapping and dense (a permuted or channels-last parameter
# gets a gradient laid out the same way), and is row-major contiguous otherwise, so that optimizer
# steps and reducers that mix a parameter with its gradient run as dense loops. A gradient that
# already obeys it is kept without a copy when nobody else holds it; enforce_grad_layout_policy(False)
# keeps any such gradient whatever its strides. Later gradients are added into the first.


def _obeys_layout_contract(g: Tensor, variable: Tensor) -> bool:
    # A contiguous variable with elements (the usual parameter: its answer from the C mirrors) is
    # non-overlapping and dense without is_non_overlapping_and_dense's sort.
    shape, stride = variable._shape, variable._stride
    if (_C._contiguous(variable) and variable.numel()) or is_non_overlapping_and_dense(shape, stride):
        for size, g_stride, v_stride in zip(g._shape, g._stride, variable._stride):
            if (size != 1 and g_stride != v_stride) or (size == 1 and g_stride == 0):
                return False
        return True
    return is_contiguous(g._shape, g._stride)


def _clone_obey_contract(g: Tensor, variable: Tensor) -> Tensor:
    """A copy of ``g`` laid out by the contract (attached to g's history when grad mode is on)."""
    shape, stride = variable._shape, variable._stride
    if type(g) is not Tensor or (type(variable) is not Tensor and not getattr(type(variable), "_is_param", False)):
        return g.clone()  # subclasses (DTensor, wrappers) lay out their own copies; a Parameter is plain
    if is_contiguous(shape, stride) or not is_non_overlapping_and_dense(shape, stride):
        return g.clone() if is_contiguous(g._shape, g._stride) else g.contiguous()
    return empty_strided(shape, stride, dtype=variable.dtype, device=variable._device).copy_(g)


def accumulate_grad(variable: Tensor, g: Tensor, owned: bool = False) -> None:
    """``variable.grad += g`` as PyTorch's AccumulateGrad: the first gradient kept or copied by the
    layout contract, later ones added in place (out of place, recorded, when the graph of the
    gradient is being built). ``owned``: nobody but the caller's buffer holds ``g`` (it may then be
    kept without a copy)."""
    old = variable.grad
    if g._layout is not strided or variable._layout is not strided or (old is not None and old._layout is not strided):
        _accumulate_sparse(variable, old, g)
    elif old is None:
        if not _STATE.grad_enabled and _stealable(g, variable, owned):
            variable.grad = g  # nobody else holds it or its memory: no copy (as PyTorch does)
        elif _STATE.grad_enabled:
            variable.grad = _clone_obey_contract(g, variable)
        else:
            variable.grad = _clone_obey_contract(g.detach(), variable)
    elif _STATE.grad_enabled:
        variable.grad = old + g
    else:
        old.add_(g)


graph._ACCUMULATE[0] = accumulate_grad  # what AccumulateGrad.apply calls


def _accumulate_sparse(variable: Tensor, old, g: Tensor) -> None:
    """AccumulateGrad with a sparse gradient (``Embedding(sparse=True)``, sparse leaves): the first
    one is kept (a copy), later ones are added, sparse + sparse staying sparse (uncoalesced, as
    PyTorch's) and dense + sparse becoming dense."""
    if old is None:
        variable.grad = g.clone() if _STATE.grad_enabled else g.detach().clone()
    elif old._layout is strided:
        if _STATE.grad_enabled:
            variable.grad = old + g
        else:
            old.add_(g)
    elif g._layout is strided:
        variable.grad = g + old
    else:
        variable.grad = old + g


# -- the execution loop -----------------------------------------------------------------------


def _dependencies(root: Node) -> dict:
    """How many edges lead into each node reachable from ``root``."""
    deps = {}
    get = deps.get
    stack = [root]
    pop, push = stack.pop, stack.append
    while stack:
        for nxt, _ in pop()._next:
            if nxt is not None:
                count = get(nxt)
                if count is None:
                    deps[nxt] = 1
                    push(nxt)
                else:
                    deps[nxt] = count + 1
    return deps


def _needed(root: Node, targets: set, run_targets: bool) -> set:
    """Nodes worth running: those with a path to a target (targets run only if ``run_targets``)."""
    needed = set()
    order = []
    seen = {root}
    stack = [root]
    while stack:  # any order that visits each node once, then a reverse topological sweep
        fn = stack.pop()
        order.append(fn)
        for nxt, _ in fn._next:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    # Propagate until stable: a node is needed if a next node is a target or needed.
    changed = True
    while changed:
        changed = False
        for fn in reversed(order):
            if fn in needed:
                continue
            if run_targets and fn in targets:
                needed.add(fn)
                changed = True
                continue
            for nxt, _ in fn._next:
                if nxt is not None and (nxt in targets or nxt in needed):
                    needed.add(fn)
                    changed = True
                    break
    return needed


def _call_tensor_hooks(fn: Node, grads: list) -> None:
    if isinstance(fn, AccumulateGrad):
        hooks = fn._tensor_pre_hooks(0)
        if hooks and grads[0] is not None:
            grads[0] = _run_hooks(hooks, grads[0])
        return
    if fn._tensor_hooks:
        for nr, hooks in fn._tensor_hooks.items():
            if hooks and grads[nr] is not None:
                grads[nr] = _run_hooks(hooks, grads[nr])
    if fn._retained:
        for nr in list(fn._retained):
            t = fn._retain_target(nr)
            g = grads[nr]
            if t is not None and g is not None and t.grad_fn is fn:
                _retain(t, g)


def _run_hooks(hooks, g):
    for hook in list(hooks.values()):
        r = hook(g)
        if r is not None:
            _check_hook_result(hook, g, r)
            g = r
    return g


def _check_hook_result(hook, value, result) -> None:
    """PyTorch's checks of a tensor hook's replacement gradient: a tensor of the same type, device
    and size (a wrong one would fail later, far from the hook, or be accumulated silently)."""
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
    name = getattr(hook, "__name__", "<unknown>")
    if result.dtype is not value.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was {value.type()} got {result.type()})")
    if result.device != value.device:
        raise RuntimeError(f"hook '{name}' has changed the device of value (was {value.device} got {result.device})")
    if tuple(result.shape) != tuple(value.shape):
        raise RuntimeError(f"hook '{name}' has changed the size of value")


def _retain(t: Tensor, g: Tensor) -> None:
    old = t._grad  # not .grad: a non-leaf captured by backward(inputs=) must not warn
    if old is None:
        t.grad = g.clone() if _STATE.grad_enabled else g.detach().clone()
    else:
        t.grad = old + g


def _is_checkpoint_valid() -> bool:
    """False inside a backward run that only computes some gradients (``autograd.grad`` or
    ``backward(inputs=...)``), where a reentrant checkpoint's inner backward cannot be confined
    to what was asked for (PyTorch's ``torch.autograd._is_checkpoint_valid``)."""
    return not _TASKS or _TASKS[-1].captures is None


class _Task:
    """One backward run, as hooks see it (``register_multi_grad_hook`` groups its calls per run)."""

    __slots__ = ("id", "deps", "needed", "captures", "grad_call", "keep_graph", "lone_root")
    _ids = iter(range(1, 1 << 62))

    def __init__(self, deps, needed, captures, grad_call, root, keep_graph=False):
        self.id = next(_Task._ids)
        self.deps, self.needed, self.captures = deps, needed, captures
        self.grad_call = grad_call  # autograd.grad(): the leaves' accumulators do not run
        self.keep_graph = keep_graph  # retain_graph: nodes keep their saved tensors after they run
        # PyTorch's engine starts a run of one root at that root's node (no GraphRoot before
        # it), so the node counts as outside the graph for _will_engine_execute_node.
        self.lone_root = root._next[0][0] if len(root._next) == 1 else None


_TASKS: list = []


def current_task():
    """The innermost backward run in progress, or None."""
    return _TASKS[-1] if _TASKS else None


def will_execute(node) -> bool:
    """Whether the backward run in progress will run ``node`` (PyTorch's _will_engine_execute_node)."""
    task = current_task()
    if task is not None and task.grad_call and isinstance(node, AccumulateGrad):
        raise RuntimeError("A leaf node was passed to _will_engine_execute_node but we are currently running "
                           "autograd.grad(). This is currently not supported.")
    if task is None or node is None or node not in task.deps or node is task.lone_root:
        return False
    return task.needed is None or node in task.needed or node in task.captures


def _native_pre(fn, grads):
    """The native loop's call for a node with hooks: tensor hooks, retain_grad, then pre-hooks."""
    if fn._hooked:
        _call_tensor_hooks(fn, grads)
    if fn._pre_hooks:
        for hook in list(fn._pre_hooks.values()):
            r = hook(tuple(grads))
            if r is not None:
                grads = list(r)
    return grads


def _native_post(fn, outputs, grads):
    for hook in list(fn._post_hooks.values()):
        r = hook(tuple(outputs), tuple(grads))
        if r is not None:
            outputs = list(r)
    return outputs


class _Ready:
    """A ready node in the engine's heap, ordered by sequence number alone: heapq's sift-up and
    sift-down are std::push_heap/pop_heap's, so equal numbers come out in PyTorch's order."""

    __slots__ = ("seq", "node")

    def __init__(self, node):
        self.seq, self.node = node._seq, node

    def __lt__(self, other):
        return self.seq > other.seq


def execute(root: GraphRoot, keep_graph: bool, create_graph: bool, captures=None, run_targets=True):
    """Runs the graph under ``root``. ``captures``: {node: [(output_nr, key)]}; the gradient
    entering each is stored in the returned dict under ``key`` (a tensor ``key`` gets it
    accumulated into its ``.grad``). With captures, only nodes leading to them run."""
    anomaly = anomaly_mode.is_enabled()
    if captures is None and not anomaly:
        # The common run (backward() without inputs): the loop is native (csrc/common/
        # autograd_engine.cpp); nodes, hooks and _release stay the Python ones used below.
        deps = _C._graph_dependencies(root)
        prev = _STATE.grad_enabled
        _STATE.grad_enabled = create_graph
        _TASKS.append(_Task(deps, None, None, False, root, keep_graph))
        try:
            _C._run_graph(root, deps, keep_graph, _native_pre, _native_post)
        finally:
            _STATE.grad_enabled = prev
            _TASKS.pop()
        return {}
    deps = _dependencies(root)
    needed = None
    captured = {}
    if captures is not None:
        needed = _needed(root, set(captures), run_targets)
    prev = _STATE.grad_enabled
    _STATE.grad_enabled = create_graph
    buffers = {}
    heappop, heappush = heapq.heappop, heapq.heappush
    heap = []
    fn = root
    _TASKS.append(_Task(deps, needed, captures, captures is not None and not run_targets, root, keep_graph))
    try:
        while True:
            grads = buffers.pop(fn, None)
            if grads is None:
                grads = [None] * fn._num_outputs
            if fn._hooked:
                _call_tensor_hooks(fn, grads)
            run = True
            if captures is not None and fn in captures:
                for nr, key in captures[fn]:
                    g = grads[nr]
                    if isinstance(key, Tensor):
                        if g is not None:
                            _retain(key, g)
                    else:
                        captured[key] = g
                run = fn in needed
            if run:
                if fn._pre_hooks:
                    for hook in list(fn._pre_hooks.values()):
                        r = hook(tuple(grads))
                        if r is not None:
                            grads = list(r)
                if anomaly:
                    outputs = anomaly_mode.run_checked(fn, grads)
                else:
                    outputs = fn.apply(grads)
                if fn._post_hooks:
                    for hook in list(fn._post_hooks.values()):
                        r = hook(tuple(outputs), tuple(grads))
                        if r is not None:
                            outputs = list(r)
                if not keep_graph:
                    fn._release()
                # The one node this one makes ready runs next without a trip through the heap
                # when nothing else is waiting (a chain); otherwise all go to the heap in the order
                # of the edges that made them ready (PyTorch's order among equal sequence numbers).
                ready = []
                for (nxt, nr), g in zip(fn._next, outputs):
                    if nxt is None:
                        continue
                    if g is not None:
                        buf = buffers.get(nxt)
                        if buf is None:
                            buf = buffers[nxt] = [None] * nxt._num_outputs
                            buf[nr] = g
                        else:
                            old = buf[nr]
                            buf[nr] = g if old is None else old + g
                    left = deps[nxt] - 1
                    deps[nxt] = left
                    if left == 0 and (needed is None or nxt in needed or nxt in captures):
                        ready.append(nxt)
                # Drop this node's references so that a gradient held only by an input buffer can
                # be taken over by AccumulateGrad without a copy (see _stealable).
                outputs = grads = g = buf = old = None
                if len(ready) == 1 and not heap:
                    fn = ready[0]
                    continue
                for nxt in ready:
                    heappush(heap, _Ready(nxt))
                ready = nxt = None
            if not heap:
                break
            fn = heappop(heap).node
    finally:
        _STATE.grad_enabled = prev
        _TASKS.pop()
    return captured


# -- entry points -----------------------------------------------------------------------------


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def _ones_root(out: Tensor) -> Tensor:
    """``ones_like(out)``, the implicit root gradient: made natively for a plain CPU tensor (each
    backward() call makes one)."""
    if type(out) is Tensor and out._device.type == "cpu" and out._layout is strided:
        g = _C.new_empty(out._shape, out.dtype, False, _STATE.inference)
        if g is not None:
            _C.fill_(g, 1)
            return g
    return ones_like(out)


def _root_grads(outputs, grad_outputs, create_graph):
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"Mismatch in number of gradients: got {len(grad_outputs)} gradients for "
                           f"{len(outputs)} outputs")
    grads = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if out._requires_grad:
                if out.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if not out.dtype.is_floating_point:
                    raise RuntimeError(
                        f"grad can be implicitly created only for real scalar outputs but got torch.{out.dtype.name}"
                    )
            g = _ones_root(out)
        elif isinstance(g, Tensor):
            if g._shape != out._shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of torch.Size({list(g._shape)}) and "
                    f"output[{i}] has a shape of torch.Size({list(out._shape)})."
                )
            if g.dtype.is_complex != out.dtype.is_complex:
                raise RuntimeError(
                    f"For complex Tensors, both grad_output and output are required to have the same dtype. "
                    f"Mismatch in dtype: grad_output[{i}] has a dtype of torch.{g.dtype.name} and "
                    f"output[{i}] has a dtype of torch.{out.dtype.name}."
                )
            if g.dtype is not out.dtype:  # an integer, bool or other-precision grad_output is cast
                g = g.to(out.dtype)
        else:
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        grads.append(g)
    return grads


def _root(outputs, grad_outputs, create_graph):
    edges = []
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise TypeError(f"outputs must be Tensors, got {type(out).__name__}")
        if not out._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        edges.append(get_gradient_edge(out))
    return GraphRoot(edges, _root_grads(outputs, grad_outputs, create_graph))


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """``ember.autograd.backward``: accumulates gradients of ``tensors`` into the leaves.
    ``grad_variables`` is PyTorch's deprecated spelling of ``grad_tensors``; ``inputs`` may be a dict
    (its values), as in PyTorch 2.13."""
    if grad_variables is not None:
        import warnings

        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.", FutureWarning, stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                               "`backward()`. Please only use `grad_tensors`.")
        grad_tensors = grad_variables
    if type(inputs) is dict:
        inputs = tuple(inputs.values())
    elif inputs is not None and not isinstance(inputs, Tensor) and hasattr(inputs, "keys"):
        raise TypeError(f"`inputs` argument to `backward()` must be a dict, not {type(inputs).__name__}. "
                        "Other Mapping types are not supported.")
    sync_pending(None, "Tensor.backward()")  # a lazy tracer's pending ops run first (their history)
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    root = _root(tensors, grad_tensors, create_graph)
    if inputs is None:
        execute(root, retain_graph, create_graph)
        return
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    captures = {}
    for t in inputs:
        if not t._requires_grad:  # PyTorch's backward(inputs=) retains grad on each input first
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        fn, nr = get_gradient_edge(t)
        if t.grad_fn is not None:
            captures.setdefault(fn, []).append((nr, t))
        else:
            captures.setdefault(fn, [])
    execute(root, retain_graph, create_graph, captures, run_targets=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``ember.autograd.grad``: the gradients of ``outputs`` with respect to ``inputs``."""
    sync_pending(None, "Tensor.backward()")  # a lazy tracer's pending ops run first (their history)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _as_tuple(outputs)
    inputs = (inputs,) if isinstance(inputs, GradientEdge) else _as_tuple(inputs)
    grad_outputs = _as_tuple(grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    for t in inputs:
        if not isinstance(t, (Tensor, GradientEdge)):
            raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got {type(t).__name__}")
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    root = _root(outputs, grad_outputs, create_graph)  # outputs without history are reported first, as PyTorch
    for t in inputs:
        if isinstance(t, Tensor) and not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    captures = {}
    for i, t in enumerate(inputs):
        fn, nr = get_gradient_edge(t) if isinstance(t, Tensor) else t
        captures.setdefault(fn, []).append((nr, i))
    captured = execute(root, retain_graph, create_graph, captures, run_targets=False)
    result = []
    for i, t in enumerate(inputs):
        g = captured.get(i)
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads and isinstance(t, Tensor):
                g = zeros_like(t)
        elif not create_graph and g._requires_grad:
            g = g.detach()
        result.append(g)
    return tuple(result)


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """``grad(..., is_grads_batched=True)``: the first dim of every grad_output indexes independent
    vector-Jacobian products; each runs as its own backward (PyTorch vmaps one), stacked per input."""
    from ember._src.ops.shape.joining import stack

    if not grad_outputs or any(not isinstance(g, Tensor) or not g._shape for g in grad_outputs):
        raise RuntimeError("If `is_grads_batched=True`, we interpret the first dimension of each grad_output as "
                           "the batch dimension. The sizes of the remaining dimensions are expected to match the "
                           "shape of the corresponding output.")
    n = grad_outputs[0]._shape[0]
    rows = []
    for i in range(n):
        rows.append(grad(outputs, inputs, tuple(g[i] for g in grad_outputs), retain_graph or i < n - 1,
                         create_graph, allow_unused=allow_unused, materialize_grads=materialize_grads))
    return tuple(None if rows[0][k] is None else stack([r[k] for r in rows]) for k in range(len(inputs)))


__all__ = ["backward", "grad", "execute", "sum_to", "fix_grad", "accumulate_grad", "output_nr"]
