"""``explain(fn)(*args)``: what a compile of ``fn`` captures (PyTorch's ``torch._dynamo.explain``)."""

from __future__ import annotations

from ._compiled import CompiledFunction


class ExplainOutput:
    """Graphs, graph breaks (reason and user source line) and guards of one call."""

    def __init__(self, graphs, break_reasons, ops_per_graph, out_guards, compile_times="", silent_splits=0):
        self.graphs = graphs
        self.graph_count = len(graphs)
        # PyTorch's count is the graphs less one (-1 for none): a break with no graph after it
        # (``if t.sum() > 0: return y``) is listed in break_reasons but not counted. Splits that
        # PyTorch keeps inside one graph (``.item()`` under capture_scalar_outputs) are no breaks.
        self.graph_break_count = len(graphs) - 1 - silent_splits
        self.break_reasons = break_reasons
        self.op_count = sum(len(ops) for ops in ops_per_graph)
        self.ops_per_graph = ops_per_graph
        self.out_guards = out_guards
        self.compile_times = compile_times

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        for i, brk in enumerate(self.break_reasons):
            lines.append(f"  Break Reason {i + 1}:")
            lines.append(f"    Reason: {brk.reason}")
            lines.append("    User Stack:")
            # traceback.FrameSummary's repr, as PyTorch's report shows its frames
            lines += [f"      <FrameSummary file {frame.filename}, line {frame.lineno} in {frame.name}>"
                      for frame in brk.user_stack]
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"  Ops {i + 1}:")
            lines += [f"    {op}" for op in ops]
        lines.append("Out Guards:")
        lines += [f"  {g}" for g in self.out_guards]
        return "\n".join(lines) + "\n"

    __repr__ = __str__


class _Listener:
    def __init__(self):
        self.graphs, self.breaks, self.ops, self.guards = [], [], [], []
        self.silent_splits = 0

    def on_graph(self, gm, rec):
        from ._compiled import _guards_text

        self.graphs.append(gm)
        self.ops.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        self.guards.extend(_guards_text(rec).splitlines()[1:])

    def on_hit(self, key):
        pass

    def on_break(self, brk):
        self.breaks.append(brk)


def explain(f, *extra_args, **extra_kwargs):
    """``explain(fn)(*args, **kwargs)`` runs ``fn`` once under the capture and reports it."""

    def inner(*args, **kwargs):
        state = CompiledFunction(getattr(f, "_orig_mod", f), "eager", False, None)
        state.want_stacks = True
        listener = state.listener = _Listener()
        state(*args, **kwargs)
        return ExplainOutput(listener.graphs, listener.breaks, listener.ops, listener.guards,
                             silent_splits=listener.silent_splits)

    if extra_args or extra_kwargs:
        return inner(*extra_args, **extra_kwargs)
    return inner
