"""``unflatten(ep)``: the exported program as a module tree shaped like the original.

Weights go back under their original dotted names (``encoder.layers.0.linear1.weight``), so
``state_dict()`` keys match the eager module's. The program's graph (unlifted: weights are
``get_attr`` nodes) is split by each node's ``nn_module_stack``: the nodes one call of a submodule
ran become that submodule's own graph (an :class:`InterpreterModule`), and its caller's graph
calls it (a ``call_module`` node), as PyTorch's unflatten does. So a submodule can be called alone
(``unflat.layer1(x)``) and swapped for another module (``unflat.layer1 = MyBlock()``).

A submodule's graph takes the values it reads from outside in the order it first reads them
(its forward's argument order when every argument is used) and returns the values its caller
uses afterwards (one, or a tuple). Dynamic sizes the caller read from an input (``sym_size``)
are read again inside from the submodule's own inputs. A module called more than once (shared)
keeps its nodes inline in its caller after the first call.
"""

from __future__ import annotations

import abc
import operator

from ember import nn

from ._program import _ProgramModule, assign_state


class FlatArgsAdapter(abc.ABC):
    """Adapts a call's flat inputs to the exported program's input structure (``unflatten``'s
    ``flat_args_adapter``): a subclass defines ``adapt``."""

    @abc.abstractmethod
    def adapt(self, target_spec, input_spec, input_args: list, metadata: dict | None = None,
              obj=None) -> list:
        """The flat inputs for ``target_spec``, from ``input_args`` laid out by ``input_spec``."""


class InterpreterModule(nn.Module):
    """A submodule of an unflattened program: its weights and children, and ``graph``, the nodes
    its call ran, which ``forward`` executes (PyTorch's ``torch.export.unflatten.InterpreterModule``)."""

    def __init__(self, graph, ty: str | None = None):
        super().__init__()
        self.graph = graph
        self._ty = ty

    def finalize(self):
        from ember.fx.graph_module import _forward_from_src

        python_code = self.graph.python_code(root_module="self")
        object.__setattr__(self, "_code", python_code.src)
        object.__setattr__(self, "_graph_fn", _forward_from_src(python_code.src, python_code.globals))

    @property
    def code(self) -> str:
        return self._code

    def forward(self, *args, **kwargs):
        in_spec = getattr(self, "_in_spec", None)
        if in_spec is not None:  # a preserved call signature: the original calling convention
            from ._pytree import tree_flatten_spec, tree_unflatten

            try:
                flat = tree_flatten_spec((args, kwargs), in_spec)
            except (ValueError, KeyError, TypeError) as exc:
                raise TypeError(f"{type(self).__name__}: the call does not match the preserved signature "
                                f"{in_spec}: {exc}") from None
            return tree_unflatten(self._graph_fn(self, *flat), self._out_spec)
        if kwargs:
            names = [n.name for n in self.graph.nodes if n.op == "placeholder"]
            args = (*args, *(kwargs[n] for n in names[len(args):]))
        return self._graph_fn(self, *args)

    def print_readable(self, print_output: bool = True, **kwargs) -> str:
        from ember import fx

        return fx.GraphModule(self, self.graph, "InterpreterModule").print_readable(print_output, **kwargs)


class UnflattenedModule(_ProgramModule):
    """The program's root: submodules as in the exported module, each an :class:`InterpreterModule`
    that the root's graph calls (not a GraphModule, as PyTorch's is not)."""

    _unflattened = True

    def __init__(self, program, flat_args_adapter=None):
        super().__init__(program)
        self.flat_args_adapter = flat_args_adapter
        graph = _split(self, program)
        object.__setattr__(self, "_graph", graph)
        self.recompile()


def unflatten(module, flat_args_adapter=None) -> UnflattenedModule:
    from ._program import ExportedProgram

    if not isinstance(module, ExportedProgram):
        # PyTorch's unflatten reads the program's signature first
        raise AttributeError(f"{type(module).__name__!r} object has no attribute 'graph_signature'")
    return UnflattenedModule(module, flat_args_adapter)


# ------------------------------------------------------------------ splitting the graph


def _stack_of(node) -> list:
    """The dotted names of the submodules (not the root) whose call ran ``node``, outermost first."""
    stack = node.meta.get("nn_module_stack") or {}
    return [path for path, _ in stack.values() if path]


def _calls_of(node) -> list:
    """The keys of those calls (``L__self__fc``, ``L__self__fc@1`` for a second call)."""
    stack = node.meta.get("nn_module_stack") or {}
    return [key for key, (path, _) in stack.items() if path]


def _is_size_node(node) -> bool:
    """A node computing a size from inputs (``sym_size`` and arithmetic on sizes), which every graph
    that needs it recomputes from its own inputs."""
    from ._sym import sym_size

    if node.op != "call_function":
        return False
    if node.target is sym_size:
        return True
    return node.target.__module__ in ("_operator", "operator") and not _stack_of(node) and \
        all(not hasattr(a, "op") or _is_size_node(a) for a in node.args)


def _place_state_updates(nodes: list) -> list:
    """Buffer updates (``assign_state`` at the graph's end) moved right after the last node that
    computes or writes the value they store (batch norm's in-place update of a buffer's clone),
    with that value's module stack cut to the buffer's owner, so the submodule that computed a
    running statistic updates it when called alone."""
    updates = [n for n in nodes if n.op == "call_function" and n.target is assign_state]
    rest = [n for n in nodes if n.target is not assign_state or n.op != "call_function"]
    _adopt_item_reads(rest)
    rest = _adopt_state_reads(rest)
    for update in updates:
        target, value = update.args
        owner = target.target.rpartition(".")[0] if getattr(target, "op", None) == "get_attr" else ""
        stack = (value.meta.get("nn_module_stack") or {}) if hasattr(value, "meta") else {}
        writers = [value, *(u for u in getattr(value, "users", ()) if u in rest)]
        last = max((rest.index(w) for w in writers if w in rest), default=len(rest) - 1)
        stack = (rest[last].meta.get("nn_module_stack") or {}) if last >= 0 else stack
        update.meta["nn_module_stack"] = {k: v for k, v in stack.items()
                                          if not v[0] or owner == v[0] or owner.startswith(v[0] + ".")}
        rest.insert(last + 1, update)
    return rest


def _adopt_item_reads(nodes: list) -> None:
    """``getitem`` of a multi-output op (``cond``) runs in the module that ran the op."""
    for node in nodes:
        if node.op == "call_function" and node.target is operator.getitem and not _stack_of(node):
            source = node.args[0]
            if hasattr(source, "meta") and source.meta.get("nn_module_stack"):
                node.meta["nn_module_stack"] = dict(source.meta["nn_module_stack"])


def _adopt_state_reads(nodes: list) -> list:
    """Nodes the root ran on weights only (the clone of a buffer that batch norm then updates in
    place), all of whose users ran in one submodule, move into it: right before their first user,
    with the users' common module stack."""
    position = {n: i for i, n in enumerate(nodes)}
    moves = []
    for node in nodes:
        if node.op != "call_function" or _stack_of(node) or _is_size_node(node) or node.target is assign_state:
            continue
        if any(hasattr(a, "op") and a.op != "get_attr" for a in node.args):
            continue
        users = [u for u in node.users if u in position and u.target is not assign_state]
        stacks = [u.meta.get("nn_module_stack") or {} for u in users]
        if not users or not all(stacks):
            continue
        common = dict(stacks[0])
        for st in stacks[1:]:
            common = {k: v for k, v in common.items() if st.get(k) == v}
        if not [v for v in common.values() if v[0]]:
            continue
        node.meta["nn_module_stack"] = common
        moves.append((node, min(users, key=position.get)))
    for node, first_user in moves:
        nodes.remove(node)
        nodes.insert(nodes.index(first_user), node)
    return nodes


def _order_children(root, program) -> None:
    """Each module's children in the exported module's order (its module call graph), as PyTorch's
    unflatten lists them; modules without weights were added when first called."""
    order = {entry.fqn: i for i, entry in enumerate(program.module_call_graph)}

    def visit(module, prefix):
        items = list(module._modules.items())
        items.sort(key=lambda kv: order.get(f"{prefix}.{kv[0]}" if prefix else kv[0], len(order)))
        module._modules.clear()
        module._modules.update(items)
        for name, child in items:
            if child is not None:
                visit(child, f"{prefix}.{name}" if prefix else name)

    visit(root, "")


class _Builder:
    """Builds the graph of the module at ``prefix`` from the (old) nodes its call ran."""

    def __init__(self, root, prefix: str, depth: int, users_outside):
        from ember import fx

        self.root = root
        self.prefix = prefix
        self.depth = depth
        self.graph = fx.Graph()
        self.env: dict = {}
        self.inputs: list = []  # old values read from outside, in first-read order
        self.users_outside = users_outside
        self.built: dict = {}  # child path -> its InterpreterModule
        self.attrs: dict = {}  # root attributes (branch graphs) this module's graph reads

    def _local(self, target: str) -> str | None:
        if not self.prefix:
            return target
        return target[len(self.prefix) + 1:] if target.startswith(self.prefix + ".") else None

    def lookup(self, old):
        if not hasattr(old, "op"):
            return old
        if old in self.env:
            return self.env[old]
        if old.op == "get_attr" and self._local(old.target) is not None:
            new = self.graph.get_attr(self._local(old.target))
        elif old.op == "get_attr" and self._subgraph(old.target) is not None:
            # a cond/while_loop branch graph held by the root: the submodule holds it too
            self.attrs[old.target] = self._subgraph(old.target)
            new = self.graph.get_attr(old.target)
        elif self.prefix and _is_size_node(old):
            new = self._size_from_inputs(old)
            if new is None:
                new = self.graph.node_copy(old, self.lookup)
        elif self.prefix:
            first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
            with self.graph.inserting_before(first) if first is not None else _nullcontext():
                new = self.graph.placeholder(old.name)
            self.inputs.append(old)
        else:
            raise AssertionError(f"unflatten: {old.name} is used before it is computed")
        new.meta = dict(old.meta)
        self.env[old] = new
        return new

    def _subgraph(self, target: str):
        from ember.fx import GraphModule

        value = getattr(self.root, target, None) if "." not in target else None
        return value if isinstance(value, GraphModule) else None

    def order_inputs(self) -> None:
        """The placeholders in the order their values were defined in the program's graph (the
        calling convention of PyTorch's InterpreterModule for a call whose signature was not
        preserved), not the order they were first read."""
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        if len(placeholders) < 2:
            return
        self.inputs.sort(key=lambda old: self.position.get(old, -1))
        first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        for old in self.inputs:
            node = self.env[old]
            if first is not None:
                first.prepend(node)
            else:
                self.graph._root.prepend(node)

    def _size_from_inputs(self, old):
        """``sym_size(x, d)`` of a tensor outside this module read instead from a tensor of this
        module's graph with the same size, so the module called alone needs no extra input
        (PyTorch's InterpreterModule takes the size as an input instead)."""
        from ._sym import sym_size

        expr = old.meta.get("sym_expr")
        if old.target is not sym_size or expr is None or old.args[0] in self.env:
            return None
        for source, new_source in self.env.items():
            for d, size in enumerate(source.meta.get("sym_shape") or ()):
                if size == expr:
                    return self.graph.call_function(sym_size, (new_source, d))
        return None

    def run(self, nodes: list):
        i = 0
        while i < len(nodes):
            node = nodes[i]
            stack, calls = _stack_of(node), _calls_of(node)
            if len(stack) > self.depth:
                child, key = stack[self.depth], calls[self.depth]
                j, end = i, i
                while j < len(nodes) and (nodes[j].op == "get_attr" or len(_calls_of(nodes[j])) > self.depth and
                                          _calls_of(nodes[j])[self.depth] == key):
                    j += 1  # (get_attr nodes are made where they are read: they do not end a call)
                    if nodes[j - 1].op != "get_attr":
                        end = j
                j = end
                if self._call_child(child, nodes[i:j]):
                    i = j
                    continue
            if node.op == "get_attr":  # made where it is read (lookup), in the graph that reads it
                i += 1
                continue
            self.env[node] = self.graph.node_copy(node, self.lookup)
            i += 1

    def _call_child(self, child: str, run: list) -> bool:
        """Replaces ``run`` (one call of ``child``) by a call_module node; False when the nodes
        stay inline (a later call of a module whose graph differs from its first call's)."""
        signature = self.signatures.get(child)
        if signature is not None:
            if child in self.built:  # a later call of a preserved module: its own nodes, inline
                self._inline(run)
                return False
            if self._call_preserved(child, run, signature):
                return True
        inside = set(run)
        sub = self._child_builder(child)
        sub.run(run)
        sub.order_inputs()
        outputs = [n for n in run if any(u not in inside for u in n.users) or n in self.users_outside]
        sub.graph.output(tuple(sub.env[n] for n in outputs) if len(outputs) != 1 else sub.env[outputs[0]])
        if child in self.built:
            if _shape_of_graph(self.built[child].graph) != _shape_of_graph(sub.graph):
                self._inline(run)
                return False
        else:
            module = _interpreter_for(self.root, child, sub.graph)
            for name, value in sub.attrs.items():
                module.add_module(name, value)  # a child, as PyTorch's unflatten registers it
            module.finalize()
            self.built[child] = module
        local = child[len(self.prefix) + 1:] if self.prefix else child
        call = self.graph.call_module(local, tuple(self.lookup(v) for v in sub.inputs))
        if len(outputs) == 1:
            self.env[outputs[0]] = call
            call.meta = dict(outputs[0].meta)
        else:
            for k, out in enumerate(outputs):
                item = self.graph.call_function(operator.getitem, (call, k))
                item.meta = dict(out.meta)
                self.env[out] = item
        return True


    def _inline(self, run: list) -> None:
        """The nodes of ``run`` become this module's own (their call of the child is forgotten)."""
        for node in run:
            node.meta["nn_module_stack"] = {k: v for k, v in node.meta["nn_module_stack"].items()
                                            if k not in _calls_of(node)[self.depth:]}

    def _child_builder(self, child: str):
        sub = _Builder(self.root, child, self.depth + 1, self.users_outside)
        sub.position = self.position
        sub.by_name = self.by_name
        sub.signatures = self.signatures
        return sub

    def _call_preserved(self, child: str, run: list, signature) -> bool:
        """``run`` as a call of ``child`` with the signature ``preserve_module_call_signature``
        recorded: the child's graph takes the call's flat arguments in order (unused ones too) and
        returns its flat results; the InterpreterModule flattens and unflattens them with the
        call's specs, and this graph calls it with the original argument structure, so another
        module taking and returning the same structure can replace it. False (the ordinary
        split) when the nodes read or give values the signature does not name."""
        from ._pytree import tree_flatten_spec
        from ._signature import TensorArgument

        def old_of(arg):
            if isinstance(arg, TensorArgument):
                return self.by_name.get(arg.name, _MISSING)
            return _Constant(arg.value)

        flat_in = [old_of(a) for a in signature.inputs]
        flat_out = [old_of(a) for a in signature.outputs]
        if _MISSING in flat_in or _MISSING in flat_out:
            return False
        inside = set(run)
        leaving = [n for n in run if any(u not in inside for u in n.users) or n in self.users_outside]
        if any(n not in flat_out for n in leaving):
            return False
        sub = self._child_builder(child)
        for i, old in enumerate(flat_in):
            name = old.name if hasattr(old, "op") else f"_positional_arg_{i}"
            ph = sub.graph.placeholder(name)
            if hasattr(old, "op"):
                ph.meta = dict(old.meta)
                sub.env.setdefault(old, ph)
        sub.run(run)
        if sub.inputs:  # a value from outside the call's arguments
            return False
        sub.graph.output(tuple(sub.env[o] if hasattr(o, "op") else o.value for o in flat_out))
        module = _interpreter_for(self.root, child, sub.graph)
        for name, value in sub.attrs.items():
            module.add_module(name, value)
        object.__setattr__(module, "_in_spec", signature.in_spec)
        object.__setattr__(module, "_out_spec", signature.out_spec)
        module.finalize()
        self.built[child] = module
        local = child[len(self.prefix) + 1:] if self.prefix else child
        values = [self.lookup(o) if hasattr(o, "op") else o.value for o in flat_in]
        args_spec, kwargs_spec = signature.in_spec.children()
        args, kwargs = [], {}
        start = 0
        for spec, key in [(s, None) for s in args_spec.children()] + \
                list(zip(kwargs_spec.children(), kwargs_spec.context)):
            part = values[start:start + spec.num_leaves]
            start += spec.num_leaves
            value = part[0] if spec.is_leaf() else self.graph.call_function(_rebuild, (part, spec))
            if key is None:
                args.append(value)
            else:
                kwargs[key] = value
        call = self.graph.call_module(local, tuple(args), kwargs)
        results = self.graph.call_function(tree_flatten_spec, (call, signature.out_spec))
        for k, out in enumerate(flat_out):
            # a result computed inside, or an argument returned as it came (after the call the
            # caller reads the call's result, which a swapped-in module may compute otherwise)
            if out in leaving or hasattr(out, "op") and out not in inside:
                item = self.graph.call_function(operator.getitem, (results, k))
                item.meta = dict(out.meta)
                self.env[out] = item
        return True


_MISSING = object()


class _Constant:
    """A number or None among a preserved call's flat arguments or results."""

    def __init__(self, value):
        self.value = value


def _rebuild(leaves: list, spec):
    """An argument of a preserved call (a tuple, dict, dataclass ...) rebuilt from its leaves."""
    from ._pytree import tree_unflatten

    return tree_unflatten(leaves, spec)


def _shape_of_graph(graph) -> list:
    """What two calls of a module must share to run one graph: its nodes' ops and targets."""
    return [(n.op, n.target if n.op != "placeholder" else None, len(n.args)) for n in graph.nodes]


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _interpreter_for(root, path: str, graph) -> InterpreterModule:
    """Turns the plain container at ``path`` (holding the weights ``_ProgramModule`` placed there)
    into an InterpreterModule running ``graph``, keeping its weights and children."""
    parent_path, _, name = path.rpartition(".")
    parent = root
    for part in parent_path.split(".") if parent_path else ():
        # A container of the module called (ModuleList, ModuleDict, a block never called itself)
        # is an InterpreterModule with an empty graph, as in PyTorch 2.13 (a module only holding
        # weights the caller reads stays a plain Module).
        child = parent._modules.get(part)
        if not isinstance(child, InterpreterModule):
            from ember import fx

            child = _into_interpreter(parent, part, fx.Graph())
            child.finalize()
        parent = child
    return _into_interpreter(parent, name, graph)


def _into_interpreter(parent, name: str, graph) -> InterpreterModule:
    old = parent._modules.get(name)
    module = InterpreterModule(graph)
    if old is not None:
        for key, value in vars(old).items():
            if key not in ("training", "graph", "_ty"):
                object.__setattr__(module, key, value)
        module.graph = graph
    parent._modules[name] = module
    return module


def _split(root, program):
    """The root's graph with each submodule call replaced by a ``call_module`` node (and the
    submodules made InterpreterModules)."""
    from ._codegen import pytree_codegen
    from ._program import _unlifted_graph

    flat = _unlifted_graph(program)
    nodes = [n for n in flat.nodes if n.op not in ("placeholder", "output")]
    nodes = _place_state_updates(nodes)
    output = next(n for n in flat.nodes if n.op == "output")
    builder = _Builder(root, "", 0, set())
    builder.position = {n: i for i, n in enumerate(flat.nodes)}
    builder.by_name = {n.name: n for n in flat.nodes}
    builder.signatures = {e.fqn: e.signature for e in program.module_call_graph
                          if e.fqn and e.signature is not None and e.signature.in_spec is not None
                          and e.signature.inputs + e.signature.outputs}
    for node in flat.nodes:
        if node.op == "placeholder":
            builder.env[node] = builder.graph.node_copy(node)
    from ember.fx.node import map_arg

    # values the root's output returns leave every submodule that computes them
    map_arg(output.args, lambda n: builder.users_outside.add(n))
    builder.run(nodes)
    new_output = builder.graph.output(map_arg(output.args[0], builder.lookup))
    new_output.meta = dict(output.meta)
    builder.graph.set_codegen(pytree_codegen(program))
    _order_children(root, program)
    return builder.graph
