"""The tracer behind ``ember.distributed.pipelining.pipeline()`` for any module.

ember-distributed sits beside this package and may not import it, so it looks the tracer up
through the entry point group ``ember.pipelining.tracers`` (this package's pyproject names
``split_module`` there). The contract, written down in distributed's ``pipelining/_split.py``:
``split_module(module, args, kwargs, split_spec, split_policy, marker)`` exports ``module`` on
one microbatch, cuts its graph before the first op of each ``split_spec`` module named
``"BEGINNING"``, after the last op of one named ``"END"``, and at each ``marker`` node
(``pipe_split()``), and returns plain data: one ``GraphModule`` per stage holding only the
parameters and buffers its ops read (under their names in ``module``), the names of the
values each stage reads and writes, the model's inputs and outputs, and the output's tree.
"""

from __future__ import annotations

from ember import fx
from ember.nn import Module, Parameter

from ._signature import InputKind, OutputKind


def _cut_positions(calls: list, split_spec: dict, marker) -> set:
    """Indexes into ``calls`` before which a new stage starts."""
    cuts = set()
    for fqn, point in split_spec.items():
        inside = [i for i, node in enumerate(calls)
                  if any(entry[0] == fqn for entry in (node.meta.get("nn_module_stack") or {}).values())]
        if not inside:
            raise ValueError(f"split_spec names '{fqn}', which runs no op in the traced forward (a submodule "
                             "name, as in named_modules())")
        cuts.add(inside[0] if point == "BEGINNING" else inside[-1] + 1)
    for i, node in enumerate(calls):
        if node.target is marker:
            cuts.add(i)
    return {c for c in cuts if 0 < c < len(calls)}


def _order_key(target: str, first: dict, rank: dict) -> tuple:
    parts = target.split(".")
    return (*[first[".".join(parts[:k])] for k in range(1, len(parts) + 1)], rank[target])


def split_module(module, args: tuple, kwargs: dict, split_spec: dict, split_policy=None, marker=None) -> dict:
    from ._pytree import tree_unflatten
    from ._trace import export

    ep = export(module, tuple(args), dict(kwargs or {}))
    gm = ep.graph_module
    if split_policy is not None:
        gm = split_policy(gm)
    sig = ep.graph_signature
    if any(spec.kind is not OutputKind.USER_OUTPUT for spec in sig.output_specs):
        written = [spec.target for spec in sig.output_specs if spec.kind is not OutputKind.USER_OUTPUT]
        raise RuntimeError(f"pipeline(): the forward of {type(module).__name__} writes {written} (buffer updates, "
                           "as BatchNorm's running statistics in training); the stages cannot carry such writes")
    state = {}  # placeholder name -> the name of the parameter, buffer or constant it reads
    values = {}  # that name -> the tensor
    user_inputs = []
    for spec in sig.input_specs:
        if spec.kind is InputKind.USER_INPUT:
            user_inputs.append(spec.arg.name)
        elif spec.kind is InputKind.PARAMETER:
            state[spec.arg.name] = spec.target
            values[spec.target] = module.get_parameter(spec.target)
        elif spec.kind is InputKind.BUFFER:
            state[spec.arg.name] = spec.target
            values[spec.target] = module.get_buffer(spec.target)
        elif spec.kind is InputKind.CONSTANT_TENSOR:  # a tensor the forward made
            state[spec.arg.name] = spec.target
            values[spec.target] = ep.constants[spec.target]
        else:
            raise RuntimeError(f"pipeline(): the traced forward takes a {spec.kind.name} input ('{spec.arg.name}'), "
                               "which the stages cannot hold")
    constants = {spec.target for spec in sig.input_specs if spec.kind is InputKind.CONSTANT_TENSOR}
    non_persistent = {spec.target for spec in sig.input_specs
                      if spec.kind is InputKind.BUFFER and spec.persistent is False}
    order = [name for name, _ in module.named_parameters()] + [name for name, _ in module.named_buffers()]
    rank = {name: i for i, name in enumerate(order)}
    for target in values:
        rank.setdefault(target, len(rank))
    nodes = list(gm.graph.nodes)
    calls = [n for n in nodes if n.op == "call_function"]
    cuts = sorted(_cut_positions(calls, split_spec, marker))
    bounds = [0, *cuts, len(calls)]
    stage_of = {}
    for s, (a, b) in enumerate(zip(bounds, bounds[1:])):
        for node in calls[a:b]:
            stage_of[node] = s
    num_stages = len(bounds) - 1
    for node in nodes:  # buffers and constants are copied into each stage that reads them; parameters not
        if node.op == "placeholder" and isinstance(values.get(state.get(node.name)), Parameter):
            users = {stage_of[u] for u in node.users if u in stage_of}
            if len(users) > 1:
                raise RuntimeError(f"pipeline(): parameter '{state[node.name]}' is read by stages {sorted(users)}; "
                                   "a parameter shared between stages (tied weights) is not supported: cut elsewhere")
    output_node = next(n for n in nodes if n.op == "output")
    outputs = [a.name if isinstance(a, fx.Node) else a for a in output_node.args[0]]
    stages, stage_inputs, stage_outputs = [], [], []
    for s in range(num_stages):
        graph = fx.Graph()
        env = {}
        reads = []
        members = [n for n in calls if stage_of[n] == s and n.target is not marker]
        mine = set(members)
        held = []
        for node in members:
            for arg in node.all_input_nodes:
                if arg in env or arg in mine:
                    continue
                if arg.name in state:
                    held.append(arg)
                    env[arg] = None
                else:
                    reads.append(arg.name)
                    env[arg] = graph.placeholder(arg.name)
                    env[arg].meta = dict(arg.meta)
        # PyTorch's stages hold their submodules in the order the forward first reaches them: each
        # attribute sorts by the first op that reads anything under each prefix of its name
        first = {}
        for i, node in enumerate(members):
            for arg in node.all_input_nodes:
                if arg.name in state:
                    parts = state[arg.name].split(".")
                    for k in range(1, len(parts) + 1):
                        first.setdefault(".".join(parts[:k]), i)
        for arg in sorted(held, key=lambda n, first=first: _order_key(state[n.name], first, rank)):
            env[arg] = graph.get_attr(state[arg.name])
            env[arg].meta = dict(arg.meta)
        for node in members:
            env[node] = graph.node_copy(node, env.__getitem__)
        writes = [n for n in members if n.name in outputs or any(stage_of.get(u, num_stages) > s for u in n.users
                                                                 if u.op != "output")]
        graph.output(tuple(env[n] for n in writes))
        sub = fx.GraphModule({}, fx.Graph())
        for target in (n.target for n in graph.nodes if n.op == "get_attr"):  # in the module's order
            *path, field = target.split(".")
            owner = sub
            for item in path:
                if item not in owner._modules:
                    owner.add_module(item, Module())
                owner = owner._modules[item]
            value = values[target]
            if isinstance(value, Parameter):
                owner.register_parameter(field, value)
            elif target in constants:  # a plain attribute, as in PyTorch's stages (not in state_dict)
                object.__setattr__(owner, field, value)
            else:
                owner.register_buffer(field, value, persistent=target not in non_persistent)
        sub.graph = graph
        stages.append(sub)
        stage_inputs.append(reads)
        stage_outputs.append([n.name for n in writes])
    return {"stages": stages, "inputs": stage_inputs, "outputs": stage_outputs, "model_inputs": user_inputs,
            "model_outputs": outputs, "unflatten": lambda leaves: tree_unflatten(list(leaves), ep.call_spec.out_spec),
            "graph": gm.graph}
