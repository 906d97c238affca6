"""Ordinary compile/export programs of the kind users write, each a function of the library
(``torch`` or ``ember``) returning plain values (NumPy arrays, numbers, strings) that the two runs
must agree on. ``test_user_programs.py`` runs them under both; ``python user_programs.py`` prints
each program's outcome side by side."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import warnings

import numpy as np

RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((4, 8)).astype(np.float32)
X6 = RNG.standard_normal((6, 8)).astype(np.float32)
IDS = RNG.integers(0, 30, (2, 7))
IDS2 = RNG.integers(0, 30, (3, 5))
TARGET = RNG.integers(0, 3, 4)


def _np(t):
    return t.detach().numpy().copy()


def _seeded(lib, build):
    lib.manual_seed(0)
    model = build(lib)
    with lib.no_grad():  # weights from NumPy: both libraries hold the same numbers
        rng = np.random.default_rng(1)
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    return model


def _mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(8, 16), lib.nn.GELU(), lib.nn.Linear(16, 3))


def _hf_model(lib):
    nn = lib.nn

    class TinyLM(nn.Module):
        """HF-style: input_ids + attention_mask keyword inputs, a dict output."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(30, 16)
            self.pos = nn.Embedding(32, 16)
            self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
            self.norm = nn.LayerNorm(16)
            self.head = nn.Linear(16, 30)

        def forward(self, input_ids, attention_mask=None):
            b, t = input_ids.shape
            h = self.embed(input_ids) + self.pos(lib.arange(t))
            pad = None if attention_mask is None else attention_mask == 0
            a, _ = self.attn(h, h, h, key_padding_mask=pad, need_weights=False)
            h = self.norm(h + a)
            return {"logits": self.head(h), "last_hidden_state": h}

    return TinyLM()


def hf_export_kwargs_dynamic(lib):
    """torch.export of an HF-style model with kwargs and dynamic batch/seq dims; ep.module() re-run."""
    model = _seeded(lib, _hf_model).eval()
    batch, seq = lib.export.Dim("batch", max=16), lib.export.Dim("seq", max=32)
    ids, mask = lib.tensor(IDS), lib.ones(2, 7, dtype=lib.int64)
    ep = lib.export.export(model, (), {"input_ids": ids, "attention_mask": mask},
                           dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}})
    ids2 = lib.tensor(IDS2)
    mask2 = lib.ones(3, 5, dtype=lib.int64)
    mask2[0, 3:] = 0
    out = ep.module()(input_ids=ids2, attention_mask=mask2)
    with lib.no_grad():
        ref = model(input_ids=ids2, attention_mask=mask2)
    return {"keys": sorted(out), "close": bool(np.allclose(_np(out["logits"]), _np(ref["logits"]), atol=1e-4)),
            "user_inputs": list(ep.graph_signature.user_inputs),
            "ranges": sorted(map(str, ep.range_constraints.values()))}


def export_run_decompositions(lib):
    model = _seeded(lib, _mlp).eval()
    ep = lib.export.export(model, (lib.tensor(X4),), dynamic_shapes=({0: lib.export.Dim.AUTO},))
    dec = ep.run_decompositions()
    out = dec.module()(lib.tensor(X6))
    kinds = sorted({s.kind.name for s in dec.graph_signature.input_specs})
    return {"out": np.round(_np(out), 4), "kinds": kinds, "n_user_out": len(dec.graph_signature.user_outputs)}


def export_save_load(lib):
    model = _seeded(lib, _mlp).eval()
    ep = lib.export.export(model, (lib.tensor(X4),), dynamic_shapes=({0: lib.export.Dim("b")},))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "mlp.pt2")
        lib.export.save(ep, path)
        loaded = lib.export.load(path)
    buf = io.BytesIO()
    lib.export.save(ep, buf)
    buf.seek(0)
    again = lib.export.load(buf)
    return {"file": np.round(_np(loaded.module()(lib.tensor(X6))), 4),
            "buffer": np.round(_np(again.module()(lib.tensor(X6))), 4),
            "ranges": sorted(map(str, loaded.range_constraints.values()))}


def export_module_wrong_shape(lib):
    model = _seeded(lib, _mlp).eval()
    ep = lib.export.export(model, (lib.tensor(X4),), dynamic_shapes=({0: lib.export.Dim("b", max=5)},))
    try:
        ep.module()(lib.tensor(X6))
    except Exception as exc:
        return type(exc).__name__
    return "no error"


def export_batchnorm_train_buffers(lib):
    model = _seeded(lib, lambda L: L.nn.Sequential(L.nn.Linear(8, 4), L.nn.BatchNorm1d(4)))
    model.train()
    ep = lib.export.export(model, (lib.tensor(X4),))
    mod = ep.module()
    mod(lib.tensor(X4))
    bn = dict(mod.named_buffers())
    return {"mutated": sorted(ep.graph_signature.buffers_to_mutate.values()),
            "running_mean": np.round(_np(bn["1.running_mean"]), 4), "nbt": int(bn["1.num_batches_tracked"])}


def export_cond(lib):
    class M(lib.nn.Module):
        def forward(self, x):
            return lib.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))

    ep = lib.export.export(M(), (lib.tensor(X4),))
    return [np.round(_np(ep.module()(lib.tensor(v))), 4) for v in (X4, -np.abs(X4))]


def compile_dynamic_true(lib):
    lib._dynamo.reset()
    calls = []

    def backend(gm, example_inputs):
        calls.append(len(example_inputs))
        return gm.forward

    f = lib.compile(lambda x: (x * 2).sum(0) / x.shape[0], backend=backend, dynamic=True)
    outs = [np.round(_np(f(lib.ones(n, 3))), 4) for n in (3, 5, 9)]
    return {"outs": outs, "graphs": len(calls)}


def compile_fullgraph_errors(lib):
    lib._dynamo.reset()
    results = []
    for body in (lambda x: x * x.sum().item(), lambda x: (print(x), x + 1)[1],
                 lambda x: x + 1 if x.sum() > 0 else x - 1):
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                lib.compile(body, backend="eager", fullgraph=True)(lib.ones(3))
            results.append("ok")
        except Exception as exc:
            results.append(type(exc).__name__)
    return results


def compile_modes(lib):
    lib._dynamo.reset()
    model = _seeded(lib, _mlp).eval()
    outs = {}
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        compiled = lib.compile(model, mode=mode)
        with lib.no_grad():
            outs[mode] = np.round(_np(compiled(lib.tensor(X4))), 4)
    try:
        lib.compile(model, mode="fast")
        outs["bad"] = "ok"
    except Exception as exc:
        outs["bad"] = type(exc).__name__
    try:
        lib.compile(model, mode="default", options={"trace.enabled": True})
        outs["both"] = "ok"
    except Exception as exc:
        outs["both"] = type(exc).__name__
    return outs


def compiler_disable(lib):
    lib._dynamo.reset()

    @lib.compiler.disable
    def helper(t):
        return t.numpy().sum()  # not traceable: runs eagerly

    def f(x):
        y = x.sin()
        s = helper(y)
        return y * float(s)

    with contextlib.redirect_stdout(io.StringIO()):
        ex = lib._dynamo.explain(f)(lib.tensor(X4))
    out = lib.compile(f, backend="eager")(lib.tensor(X4))
    return {"out": np.round(_np(out), 4), "graphs": ex.graph_count, "breaks": ex.graph_break_count}


def allow_in_graph(lib):
    lib._dynamo.reset()

    def my_op(x):
        return x.relu() + 1

    lib._dynamo.allow_in_graph(my_op)
    targets = []

    def backend(gm, example_inputs):
        targets.extend(str(getattr(n.target, "__name__", n.target)) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    out = lib.compile(lambda x: my_op(x) * 2, backend=backend)(lib.tensor(X4))
    return {"out": np.round(_np(out), 4), "my_op_in_graph": "my_op" in targets}


def breaks_on_print_and_branch(lib):
    lib._dynamo.reset()

    def f(x):
        y = x.relu()
        print("step")
        if y.mean() > 0.3:
            y = y * 2
        return y.sum()

    with contextlib.redirect_stdout(io.StringIO()) as out:
        ex = lib._dynamo.explain(f)(lib.tensor(X4))
        res = lib.compile(f, backend="eager")(lib.tensor(X4))
    return {"graphs": ex.graph_count, "breaks": ex.graph_break_count, "n_reasons": len(ex.break_reasons),
            "printed": out.getvalue().count("step"), "res": round(float(res), 3)}


def compile_training_step(lib):
    lib._dynamo.reset()
    model = _seeded(lib, _mlp)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    target = lib.tensor(TARGET)

    @lib.compile(backend="eager")
    def step(x):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        return loss

    losses = [round(float(step(lib.tensor(X4))), 4) for _ in range(3)]
    return losses


def module_compile_inplace(lib):
    lib._dynamo.reset()
    model = _seeded(lib, _mlp).eval()
    model.compile(backend="eager")
    with lib.no_grad():
        return {"out": np.round(_np(model(lib.tensor(X6))), 4), "type": type(model).__name__}


def mark_dynamic_recompiles(lib):
    lib._dynamo.reset()
    count = [0]

    def backend(gm, example_inputs):
        count[0] += 1
        return gm.forward

    f = lib.compile(lambda x: x.cos() + x.shape[0], backend=backend)
    for n in (3, 4, 5, 6):
        x = lib.ones(n, 2)
        lib._dynamo.mark_dynamic(x, 0)
        f(x)
    return count[0]


def onnx_dynamo_ort(lib):
    import onnxruntime as ort

    model = _seeded(lib, _mlp).eval()
    program = lib.onnx.export(model, (lib.tensor(X4),), dynamo=True,
                              dynamic_shapes=({0: lib.export.Dim("batch")},))
    buf = io.BytesIO()
    program.save(buf) if hasattr(program, "save") and lib.__name__ == "ember" else None
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx")
        program.save(path)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        got = sess.run(None, {name: X6})[0]
    with lib.no_grad():
        want = _np(model(lib.tensor(X6)))
    return {"ort_matches_eager": bool(np.allclose(got, want, atol=1e-5)), "shape": got.shape}


def jit_script_function(lib):
    @lib.jit.script
    def clamp_sum(x, lo: float):
        if x.sum() > 0:
            return x.clamp(min=lo).sum()
        return x.sum()

    return [round(float(clamp_sum(lib.tensor(v), 0.1)), 4) for v in (X4, -np.abs(X4))]


def jit_trace_and_save(lib):
    model = _seeded(lib, _mlp).eval()
    traced = lib.jit.trace(model, lib.tensor(X4))
    buf = io.BytesIO()
    lib.jit.save(traced, buf)
    buf.seek(0)
    loaded = lib.jit.load(buf)
    with lib.no_grad():
        return {"traced": np.round(_np(traced(lib.tensor(X6))), 4), "loaded": np.round(_np(loaded(lib.tensor(X6))), 4)}


def jit_script_module(lib):
    class Gate(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(8, 8)

        def forward(self, x):
            h = self.fc(x)
            return h * lib.sigmoid(h)

    model = _seeded(lib, lambda L: Gate()).eval()
    scripted = lib.jit.script(model)
    with lib.no_grad():
        return np.round(_np(scripted(lib.tensor(X4))), 4)


def export_auto_dims_tuple_output(lib):
    class TwoOut(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(8, 2)

        def forward(self, x, scale: float = 2.0):
            y = self.fc(x)
            return y * scale, y.softmax(-1)

    model = _seeded(lib, lambda L: TwoOut()).eval()
    ep = lib.export.export(model, (lib.tensor(X4),), {"scale": 3.0},
                           dynamic_shapes={"x": {0: lib.export.Dim.AUTO}, "scale": None})
    a, b = ep.module()(lib.tensor(X6), scale=3.0)
    return {"a": np.round(_np(a), 4), "b": np.round(_np(b), 4),
            "ranges": sorted(map(str, ep.range_constraints.values()))}


def compile_exported_module(lib):
    lib._dynamo.reset()
    model = _seeded(lib, _mlp).eval()
    ep = lib.export.export(model, (lib.tensor(X4),), dynamic_shapes=({0: lib.export.Dim("b")},))
    compiled = lib.compile(ep.module(), backend="eager")
    return [np.round(_np(compiled(lib.tensor(v))), 4) for v in (X4, X6)]


def compile_python_int_argument(lib):
    lib._dynamo.reset()
    count = [0]

    def backend(gm, example_inputs):
        count[0] += 1
        return gm.forward

    f = lib.compile(lambda x, k: x.roll(k, 0) * k, backend=backend)
    outs = [np.round(_np(f(lib.tensor(X4), k)), 4) for k in (1, 2, 3, 4)]
    return {"outs": outs, "graphs": count[0]}


def explicit_graph_break(lib):
    lib._dynamo.reset()

    def f(x):
        y = x.exp()
        lib._dynamo.graph_break()
        return y.log1p()

    ex = lib._dynamo.explain(f)(lib.tensor(X4))
    return {"graphs": ex.graph_count, "breaks": ex.graph_break_count,
            "out": np.round(_np(lib.compile(f, backend="eager")(lib.tensor(X4))), 4)}


def export_lstm_dynamic_batch(lib):
    class Tagger(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lib.nn.LSTM(8, 6, batch_first=True)
            self.out = lib.nn.Linear(6, 2)

        def forward(self, x):
            h, _ = self.lstm(x)
            return self.out(h[:, -1])

    model = _seeded(lib, lambda L: Tagger()).eval()
    x = lib.tensor(np.stack([X4] * 3))
    ep = lib.export.export(model, (x,), dynamic_shapes=({0: lib.export.Dim("batch")},))
    x2 = lib.tensor(np.stack([X6[:4]] * 5))
    with lib.no_grad():
        return {"ep": np.round(_np(ep.module()(x2)), 4), "eager": np.round(_np(model(x2)), 4)}


def export_int_of_size(lib):
    class Pool(lib.nn.Module):
        def forward(self, x):
            n = x.shape[1]
            return x[:, : n // 2].mean(1) * float(n)

    outcomes = {}
    for kind in ("named", "auto"):
        dim = lib.export.Dim("t") if kind == "named" else lib.export.Dim.AUTO
        try:
            ep = lib.export.export(Pool(), (lib.tensor(X4),), dynamic_shapes=({1: dim},))
            outcomes[kind] = ("ok", sorted(map(str, ep.range_constraints.values())))
        except Exception as exc:
            outcomes[kind] = type(exc).__name__
    return outcomes


def unflatten_swap_block(lib):
    model = _seeded(lib, _mlp).eval()
    ep = lib.export.export(model, (lib.tensor(X4),))
    unflat = lib.export.unflatten(ep)
    first = np.round(_np(getattr(unflat, "0")(lib.tensor(X4))), 4)
    setattr(unflat, "2", lib.nn.Identity())
    return {"first_layer": first, "swapped": np.round(_np(unflat(lib.tensor(X4))), 4),
            "children": [n for n, _ in unflat.named_children()]}


def compile_inference_mode(lib):
    lib._dynamo.reset()
    model = _seeded(lib, _mlp).eval()
    compiled = lib.compile(model)
    with lib.inference_mode():
        a = compiled(lib.tensor(X4))
    with lib.no_grad():
        b = compiled(lib.tensor(X6))
    c = compiled(lib.tensor(X4))
    return {"a": np.round(_np(a), 4), "b": np.round(_np(b), 4), "c_requires_grad": c.requires_grad,
            "a_inference": a.is_inference()}


def onnx_hf_dynamic_seq(lib):
    import onnxruntime as ort

    class Enc(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = lib.nn.Embedding(30, 16)
            self.layer = lib.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)

        def forward(self, input_ids):
            return self.layer(self.embed(input_ids)).mean(1)

    model = _seeded(lib, lambda L: Enc()).eval()
    dims = {"input_ids": {0: lib.export.Dim("batch"), 1: lib.export.Dim("seq")}}
    program = lib.onnx.export(model, (lib.tensor(IDS),), dynamo=True, dynamic_shapes=dims)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx")
        program.save(path)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        got = sess.run(None, {sess.get_inputs()[0].name: IDS2})[0]
    with lib.no_grad():
        want = _np(model(lib.tensor(IDS2)))
    return {"ort_matches_eager": bool(np.allclose(got, want, atol=1e-4)), "shape": got.shape}


def compile_conv_dynamic_hw(lib):
    lib._dynamo.reset()
    count = [0]

    def backend(gm, example_inputs):
        count[0] += 1
        return gm.forward

    model = _seeded(lib, lambda L: L.nn.Sequential(L.nn.Conv2d(3, 4, 3, padding=1), L.nn.ReLU(),
                                                   L.nn.AdaptiveAvgPool2d(1), L.nn.Flatten())).eval()
    compiled = lib.compile(model, backend=backend, dynamic=True)
    outs = []
    with lib.no_grad():
        for hw in (8, 11, 16):
            x = lib.tensor(np.linspace(-1, 1, 2 * 3 * hw * hw, dtype=np.float32).reshape(2, 3, hw, hw))
            outs.append(np.round(_np(compiled(x)), 4))
    return {"outs": outs, "graphs": count[0]}


def exported_module_misuse(lib):
    model = _seeded(lib, _mlp).eval()
    mod = lib.export.export(model, (lib.tensor(X4),)).module()
    found = []
    for call in (lambda: mod.eval(), lambda: mod(lib.tensor(X4), lib.tensor(X4)), lambda: mod(x=lib.tensor(X4)),
                 lambda: mod(lib.tensor(X4[:, :5])), lambda: mod(lib.tensor(X4).double())):
        try:
            call()
            found.append("ok")
        except Exception as exc:
            found.append(type(exc).__name__)
    return found


def export_view_batch_flatten(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.Conv2d(1, 2, 3)
            self.fc = lib.nn.Linear(2 * 4 * 4, 3)

        def forward(self, x):
            h = self.conv(x)
            return self.fc(h.view(x.size(0), -1))

    model = _seeded(lib, lambda L: Net()).eval()
    x = lib.tensor(np.linspace(0, 1, 3 * 36, dtype=np.float32).reshape(3, 1, 6, 6))
    ep = lib.export.export(model, (x,), dynamic_shapes=({0: lib.export.Dim("batch")},))
    x2 = lib.tensor(np.linspace(0, 1, 5 * 36, dtype=np.float32).reshape(5, 1, 6, 6))
    return {"out": np.round(_np(ep.module()(x2)), 4), "ranges": sorted(map(str, ep.range_constraints.values()))}


def export_derived_dim(lib):
    class Halves(lib.nn.Module):
        def forward(self, x, y):
            return x[: y.shape[0]] + y, x[y.shape[0]:] * 2

    b = lib.export.Dim("b", min=2, max=32)
    ep = lib.export.export(Halves(), (lib.ones(8, 3), lib.ones(4, 3)),
                           dynamic_shapes={"x": {0: 2 * b}, "y": {0: b}})
    a, c = ep.module()(lib.ones(12, 3), lib.ones(6, 3))
    try:
        ep.module()(lib.ones(12, 3), lib.ones(5, 3))
        bad = "ok"
    except Exception as exc:
        bad = type(exc).__name__
    return {"shapes": [tuple(a.shape), tuple(c.shape)], "bad": bad,
            "ranges": sorted(map(str, ep.range_constraints.values()))}


def compile_side_effects_list(lib):
    lib._dynamo.reset()
    seen = []

    @lib.compile(backend="eager")
    def f(x):
        seen.append(x.shape[0])
        return x.sum() * len(seen), {"n": len(seen)}

    outs = [f(lib.ones(n)) for n in (2, 2, 3)]
    return {"seen": seen, "outs": [(round(float(a), 2), d["n"]) for a, d in outs]}


def compile_sdpa(lib):
    lib._dynamo.reset()
    q = lib.tensor(np.random.default_rng(5).standard_normal((2, 2, 5, 4)).astype(np.float32))

    def attn(q):
        return lib.nn.functional.scaled_dot_product_attention(q, q * 0.5, q.flip(-1), is_causal=True)

    return {"eager": np.round(_np(attn(q)), 4), "compiled": np.round(_np(lib.compile(attn)(q)), 4)}


# ------------------------------------------------------------------ session 16: torch.export tutorial kinds


def export_dim_range_and_derived(lib):
    Dim = lib.export.Dim

    class M(lib.nn.Module):
        def forward(self, x, y):
            return lib.cat([x, x], 0) + y  # y's dim 0 is 2 * x's

    n = Dim("n", min=2, max=16)
    ep = lib.export.export(M(), (lib.tensor(X4), lib.tensor(np.concatenate([X4, X4]))),
                           dynamic_shapes={"x": {0: n}, "y": {0: 2 * n}})
    out = ep.module()(lib.tensor(X6), lib.tensor(np.concatenate([X6, X6])))
    errors = []
    for x, y in ((X6, X4), (np.zeros((17, 8), np.float32), np.zeros((34, 8), np.float32))):
        try:
            ep.module()(lib.tensor(x), lib.tensor(y))
            errors.append("no error")
        except Exception as exc:
            errors.append(type(exc).__name__)
    return {"out": np.round(_np(out), 4), "ranges": sorted(map(str, ep.range_constraints.values())),
            "errors": errors}


def export_while_loop(lib):
    from importlib import import_module

    while_loop = import_module(f"{lib.__name__}._higher_order_ops").while_loop

    class M(lib.nn.Module):
        def forward(self, it, x):
            def cond_fn(it, x):
                return it.sum() < 5

            def body_fn(it, x):
                return it + 1, x * 2 + 1

            return while_loop(cond_fn, body_fn, (it, x))

    ep = lib.export.export(M(), (lib.tensor(0), lib.tensor(X4)))
    outs = [ep.module()(lib.tensor(k), lib.tensor(X4)) for k in (0, 3)]
    return [(int(i), np.round(_np(x), 3)) for i, x in outs]


def export_map(lib):
    from importlib import import_module

    hop = import_module(f"{lib.__name__}._higher_order_ops")

    class M(lib.nn.Module):
        def forward(self, xs, y):
            return hop.map(lambda x, y: x.sin() + y, xs, y)

    ep = lib.export.export(M(), (lib.tensor(X4), lib.tensor(X4[0])))
    return np.round(_np(ep.module()(lib.tensor(X4), lib.tensor(X4[1]))), 4)


def export_custom_decomposition_table(lib):
    model = _seeded(lib, _mlp).eval()
    ep = lib.export.export(model, (lib.tensor(X4),))
    table = lib.export.default_decompositions()
    aten = lib.ops.aten
    table[aten.gelu.default] = lambda x, approximate="none": x * lib.sigmoid(1.702 * x)  # a user's own rule
    dec = ep.run_decompositions(table)
    kept = ep.run_decompositions({})
    # (torch's targets are OpOverloads named "sigmoid.default", ember's ops functions named "sigmoid")
    targets = {getattr(n.target, "__name__", "").split(".")[0] for n in dec.graph.nodes if n.op == "call_function"}
    return {"custom": np.round(_np(dec.module()(lib.tensor(X4))), 3),
            "sigmoid_in_graph": "sigmoid" in targets, "gelu_in_graph": "gelu" in targets,
            "kept_same": np.round(_np(kept.module()(lib.tensor(X4))), 4)}


def export_reexport_module(lib):
    model = _seeded(lib, _mlp).eval()
    Dim = lib.export.Dim
    ep = lib.export.export(model, (lib.tensor(X4),), dynamic_shapes=({0: Dim("b")},))
    again = lib.export.export(ep.module(), (lib.tensor(X4),), dynamic_shapes=({0: Dim("b")},))
    sig = again.graph_signature
    return {"out": np.round(_np(again.module()(lib.tensor(X6))), 4),
            "n_params": len(sig.parameters), "ranges": sorted(map(str, again.range_constraints.values()))}


def export_save_extra_files(lib):
    model = _seeded(lib, _mlp).eval()
    ep = lib.export.export(model, (lib.tensor(X4),))
    buf = io.BytesIO()
    lib.export.save(ep, buf, extra_files={"meta.json": '{"v": 1}', "note.txt": "hello"})
    buf.seek(0)
    extra = {"meta.json": "", "note.txt": ""}
    loaded = lib.export.load(buf, extra_files=extra)
    return {"extra": {k: v if isinstance(v, str) else v.decode() for k, v in extra.items()},
            "out": np.round(_np(loaded.module()(lib.tensor(X4))), 4)}


def export_nonstrict_number_inputs(lib):
    class M(lib.nn.Module):
        def forward(self, x, scale: float, flag: bool, mode: str = "sum"):
            y = x * scale
            if flag:
                y = y + 1
            return y.sum(0) if mode == "sum" else y.mean(0)

    ep = lib.export.export(M(), (lib.tensor(X4), 2.5, True), {"mode": "mean"}, strict=False)
    specs = [(s.kind.name, type(s.arg).__name__) for s in ep.graph_signature.input_specs]
    same_call = ep.module()(lib.tensor(X4), 2.5, True, mode="mean")
    try:
        ep.module()(lib.tensor(X4), 3.0, True, mode="mean")
        other = "no error"
    except Exception as exc:
        other = type(exc).__name__
    return {"specs": specs, "out": np.round(_np(same_call), 4), "other_number": other}


def export_buffer_mutated_in_forward(lib):
    class Counter(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", lib.zeros(()))
            self.register_buffer("total", lib.zeros(8))

        def forward(self, x):
            self.calls.add_(1)
            self.total.add_(x.sum(0))
            return x * self.calls

    ep = lib.export.export(Counter(), (lib.tensor(X4),))
    mod = ep.module()
    outs = [np.round(_np(mod(lib.tensor(X4))), 4) for _ in range(2)]
    sig = ep.graph_signature
    return {"outs": outs, "calls": float(mod.calls), "total": np.round(_np(mod.total), 4),
            "mutated": sorted(sig.buffers_to_mutate.values()), "kinds": [s.kind.name for s in sig.output_specs]}


def export_graph_signature_fields(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(8, 3)
            self.register_buffer("shift", lib.ones(3))
            self.register_buffer("scratch", lib.zeros(3), persistent=False)

        def forward(self, x, bias):
            return {"y": self.fc(x) + self.shift + self.scratch + bias, "n": x.shape[0]}

    ep = lib.export.export(M(), (lib.tensor(X4), lib.ones(3)))
    sig = ep.graph_signature
    return {"parameters": list(sig.parameters), "buffers": list(sig.buffers),
            "non_persistent": list(sig.non_persistent_buffers), "user_inputs": list(sig.user_inputs),
            "user_outputs": list(sig.user_outputs), "inputs_to_parameters": dict(sig.inputs_to_parameters),
            "inputs_to_buffers": dict(sig.inputs_to_buffers), "state_dict": sorted(ep.state_dict),
            "constants": sorted(ep.constants), "out_kinds": [s.kind.name for s in sig.output_specs]}


def export_draft(lib):
    class M(lib.nn.Module):
        def forward(self, x, k):
            n = k.item()
            return x[:n] * 2

    ep = lib.export.draft_export(M(), (lib.tensor(X6), lib.tensor(3)))
    return {"out": np.round(_np(ep.module()(lib.tensor(X6), lib.tensor(3))), 4),
            "report_empty": ep._report.successful() if hasattr(ep, "_report") else None}


def onnx_dynamo_cond_and_dims(lib):
    import onnxruntime as ort

    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(8, 4)

        def forward(self, x, y):
            return self.fc(lib.cat([x, x], 0) + y).relu()

    model = _seeded(lib, lambda L: M()).eval()
    n = lib.export.Dim("n", min=2, max=32)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx")
        with contextlib.redirect_stdout(io.StringIO()):
            lib.onnx.export(model, (lib.tensor(X4), lib.tensor(np.concatenate([X4, X4]))), path, dynamo=True,
                            input_names=["x", "y"], dynamic_shapes={"x": {0: n}, "y": {0: 2 * n}})
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        (out,) = sess.run(None, {"x": X6, "y": np.concatenate([X6, X6])})
    return np.round(out, 4)


# -- session 17's sweep (torch.export docs' programs)

def export_derived_dim_docs_example(lib):
    # torch.export docs' derived-dim example: x[1:] + y with x's dim dx + 1
    class M(lib.nn.Module):
        def forward(self, x, y):
            return x[1:] + y

    dx = lib.export.Dim("dx", min=3, max=64)
    ep = lib.export.export(M(), (lib.ones(5, 2), lib.ones(4, 2)), dynamic_shapes=({0: dx + 1}, {0: dx}))
    out = [np.round(_np(ep.module()(lib.ones(n + 1, 2), lib.ones(n, 2))), 4) for n in (3, 9)]
    try:
        ep.module()(lib.ones(5, 2), lib.ones(5, 2))
        err = None
    except Exception as e:
        err = type(e).__name__
    return {"out": out, "err": err, "ranges": sorted(str(v) for v in ep.range_constraints.values())}


def export_dim_min_max_calls(lib):
    class M(lib.nn.Module):
        def forward(self, x):
            return x * 2

    ep = lib.export.export(M(), (lib.ones(5, 2),), dynamic_shapes=({0: lib.export.Dim("b", min=3, max=8)},))
    res = []
    for n in (2, 3, 8, 9):
        try:
            res.append(tuple(ep.module()(lib.ones(n, 2)).shape))
        except Exception as e:
            res.append((type(e).__name__, str(e).splitlines()[0]))
    return res


def export_cond_operands_of_several_shapes(lib):
    class M(lib.nn.Module):
        def forward(self, x, y, w):
            def t(x, y, w):
                return (x @ w).sum(0) + y
            def f(x, y, w):
                return (x * 2).sum(0)[: y.shape[0]] * y
            return lib.cond(x.sum() > 0, t, f, (x, y, w))

    x, y, w = lib.tensor(X4), lib.arange(8.0), lib.tensor(np.eye(8, dtype=np.float32))
    ep = lib.export.export(M(), (x, y, w))
    return [np.round(_np(ep.module()(s * x, y, w)), 4) for s in (1, -1)]


def export_cond_on_a_dynamic_size(lib):
    class M(lib.nn.Module):
        def forward(self, x):
            return lib.cond(x.shape[0] > 4, lambda x: x.cos(), lambda x: x.sin(), (x,))

    ep = lib.export.export(M(), (lib.tensor(X6),), dynamic_shapes=({0: lib.export.Dim("n", min=2, max=16)},))
    return [np.round(_np(ep.module()(lib.tensor(X6[:n]))), 4) for n in (3, 6)]


def export_decomposed_conv_bn_runs(lib):
    model = _seeded(lib, lambda L: L.nn.Sequential(L.nn.Conv2d(3, 4, 3), L.nn.BatchNorm2d(4), L.nn.ReLU(),
                                                   L.nn.Flatten(), L.nn.Linear(4 * 4 * 4, 2))).eval()
    x = lib.tensor(np.linspace(-1, 1, 2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6))
    ep = lib.export.export(model, (x,)).run_decompositions()
    return np.round(_np(ep.module()(x)), 4)


def export_print_readable(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(8, 3)

        def forward(self, x):
            return self.fc(x).relu()

    ep = lib.export.export(M(), (lib.tensor(X4),))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        text = ep.graph_module.print_readable()
    return {"returns_str": isinstance(text, str), "printed": bool(buf.getvalue()), "has_forward": "def forward" in text,
            "class_line": text.strip().splitlines()[0].startswith("class GraphModule"),
            "printed_equals_returned": buf.getvalue().strip() == text.strip(),
            "kw": ep.graph_module.print_readable(print_output=False) == text}


def unflatten_round_trip_and_reexport(lib):
    class Block(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(x).tanh()

    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Block()
            self.b = Block()
            self.register_buffer("scale", lib.full((8,), 0.5))

        def forward(self, x):
            return self.b(self.a(x)) * self.scale

    m = _seeded(lib, lambda L: M())
    ep = lib.export.export(m, (lib.tensor(X4),))
    u = lib.export.unflatten(ep)
    out = _np(u(lib.tensor(X4)))
    names = sorted(n for n, _ in u.named_modules())
    sd = sorted(u.state_dict())
    ep2 = lib.export.export(u, (lib.tensor(X4),))
    return {"out": np.round(out, 4), "names": names, "sd": sd, "re": np.round(_np(ep2.module()(lib.tensor(X4))), 4),
            "eager": np.round(_np(m(lib.tensor(X4))), 4)}


def export_state_dict_and_constants(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(8, 3)
            self.register_buffer("run", lib.zeros(3))
            self.register_buffer("tmp", lib.ones(3), persistent=False)
            self.const = lib.arange(3.0)

        def forward(self, x):
            return self.fc(x) + self.run + self.tmp + self.const

    m = _seeded(lib, lambda L: M())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = lib.export.export(m, (lib.tensor(X4),))
    return {"sd": sorted(ep.state_dict), "consts": sorted(ep.constants),
            "types": sorted(type(v).__name__ for v in ep.state_dict.values()),
            "kinds": [s.kind.name for s in ep.graph_signature.input_specs],
            "targets": [s.target for s in ep.graph_signature.input_specs],
            "params": [n for n, _ in ep.named_parameters()], "buffers": [n for n, _ in ep.named_buffers()],
            "out": np.round(_np(ep.module()(lib.tensor(X4))), 4)}


def onnx_dynamo_cond_ort(lib):
    import onnxruntime as ort
    class M(lib.nn.Module):
        def forward(self, x):
            return lib.cond(x.sum() > 0, lambda x: x.cos(), lambda x: x.sin() * 2, (x,))

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx")
        with contextlib.redirect_stdout(io.StringIO()):
            lib.onnx.export(M(), (lib.tensor(X4),), path, dynamo=True, input_names=["x"])
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return [np.round(sess.run(None, {"x": s * X4})[0], 4) for s in (1, -1)]


def jit_trace_script_save_entry_points(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(8, 3)

        def forward(self, x):
            return self.fc(x).relu()

    m = _seeded(lib, lambda L: M())
    tr = lib.jit.trace(m, lib.tensor(X4))
    sc = lib.jit.script(m)
    sc(lib.tensor(X4))  # ember saves a scripted module at its last call's inputs (docs/deviations.md)
    buf = io.BytesIO()
    lib.jit.save(sc, buf)
    buf.seek(0)
    ld = lib.jit.load(buf)
    return {"trace": np.round(_np(tr(lib.tensor(X6))), 4), "script": np.round(_np(sc(lib.tensor(X6))), 4),
            "loaded": np.round(_np(ld(lib.tensor(X6))), 4), "tr_type": type(tr).__name__, "sc_type": type(sc).__name__,
            "is_scripting": lib.jit.is_scripting(), "sd": sorted(sc.state_dict())}


def export_program_accessors(lib):
    class Sub(lib.nn.Module):
        def forward(self, x):
            return x + 1

    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = Sub()

        def forward(self, x):
            return self.sub(x) * 2

    ep = lib.export.export(M(), (lib.tensor(X4),))
    return {"fqns": [e.fqn for e in ep.module_call_graph], "example": type(ep.example_inputs).__name__,
            "n_example": len(ep.example_inputs[0]), "dialect": ep.dialect,
            "verifiers": [v.__name__ for v in ep.verifiers], "decomposed": ep.run_decompositions().dialect,
            "str_has_sig": "Graph signature" in str(ep), "call_spec": ep.call_spec is not None}


def export_shapes_collection(lib):
    class M(lib.nn.Module):
        def forward(self, x, y):
            return x + y

    x, y = lib.ones(4, 3), lib.ones(4, 3)
    sc = lib.export.ShapesCollection()
    n = lib.export.Dim("n", max=32)
    sc[x] = {0: n}
    sc[y] = {0: n}
    ep = lib.export.export(M(), (x, y), dynamic_shapes=sc)
    return {"ranges": sorted(str(v) for v in ep.range_constraints.values()),
            "out": _np(ep.module()(lib.ones(7, 3), lib.ones(7, 3))).sum()}


def export_dims_helper(lib):
    class M(lib.nn.Module):
        def forward(self, x, y):
            return x @ y

    a, b = lib.export.dims("a", "b", max=64)
    ep = lib.export.export(M(), (lib.ones(4, 5), lib.ones(5, 3)), dynamic_shapes=({0: a, 1: b}, {0: b}))
    return {"ranges": sorted(str(v) for v in ep.range_constraints.values()),
            "shape": tuple(ep.module()(lib.ones(6, 7), lib.ones(7, 3)).shape)}


def unflatten_wrong_batch_after_swap(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(8, 8)
            self.b = lib.nn.Linear(8, 3)

        def forward(self, x):
            return self.b(self.a(x).relu())

    m = _seeded(lib, lambda L: M())
    ep = lib.export.export(m, (lib.tensor(X4),), preserve_module_call_signature=("a",))
    u = lib.export.unflatten(ep)
    new = _seeded(lib, lambda L: L.nn.Linear(8, 8))
    u.set_submodule("a", new)
    out = np.round(_np(u(lib.tensor(X4))), 4)
    try:  # exported at batch 4: torch's unflatten check, not ep.module()'s "Guard failed"
        u(lib.tensor(X6))
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    return {"out": out, "error": error}


# ---- session 18 sweep

H16 = RNG.standard_normal((2, 7, 16)).astype(np.float32)
H16B = RNG.standard_normal((3, 11, 16)).astype(np.float32)


def _rotary(lib):
    nn = lib.nn

    class Rotary(nn.Module):
        def __init__(self, dim=8, base=10000.0, max_pos=64):
            super().__init__()
            inv = 1.0 / (base ** (lib.arange(0, dim, 2).float() / dim))
            self.register_buffer("inv_freq", inv, persistent=False)

        def forward(self, x, position_ids):
            freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
            emb = lib.cat((freqs, freqs), dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return lib.cat((-x2, x1), dim=-1)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(16, 16)
            self.k = nn.Linear(16, 16)
            self.v = nn.Linear(16, 16)
            self.o = nn.Linear(16, 16)
            self.rot = Rotary()

        def forward(self, h, attention_mask):
            b, t, _ = h.shape
            q = self.q(h).view(b, t, 2, 8).transpose(1, 2)
            k = self.k(h).view(b, t, 2, 8).transpose(1, 2)
            v = self.v(h).view(b, t, 2, 8).transpose(1, 2)
            pos = lib.arange(t, device=h.device).unsqueeze(0).expand(b, -1)
            cos, sin = self.rot(v, pos)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            causal = lib.triu(lib.ones(t, t, dtype=lib.bool, device=h.device), diagonal=1)
            pad = attention_mask[:, None, None, :] == 0
            mask = causal[None, None] | pad
            scores = (q @ k.transpose(-1, -2)) / (8 ** 0.5)
            scores = lib.where(mask, lib.full_like(scores, float("-inf")), scores)
            p = scores.softmax(-1)
            p = lib.where(lib.isnan(p), lib.zeros_like(p), p)
            out = (p @ v).transpose(1, 2).reshape(b, t, 16)
            return self.o(out)

    return Attn()


def export_rotary_causal_attention_dynamic(lib):
    """HF-style attention: rotary embeddings from arange, a causal mask from triu OR a padding
    mask, torch.where on the bool mask; dynamic batch and seq; ep.module() at another size."""
    model = _seeded(lib, _rotary).eval()
    b, s = lib.export.Dim("b", max=8), lib.export.Dim("s", min=2, max=32)
    mask = lib.ones(2, 7, dtype=lib.int64)
    ep = lib.export.export(model, (lib.tensor(H16), mask), dynamic_shapes=({0: b, 1: s}, {0: b, 1: s}))
    mask2 = lib.ones(3, 11, dtype=lib.int64)
    mask2[1, 8:] = 0
    out = ep.module()(lib.tensor(H16B), mask2)
    with lib.no_grad():
        ref = model(lib.tensor(H16B), mask2)
    return {"out": np.round(_np(out), 4), "eager_close": bool(np.allclose(_np(out), _np(ref), atol=1e-5)),
            "ranges": sorted(map(str, ep.range_constraints.values())),
            "user_inputs": list(ep.graph_signature.user_inputs)}


def _kv_cache(lib):
    nn = lib.nn

    class CachedAttn(nn.Module):
        """A KV cache held as buffers, written at positions [pos, pos + t) in forward."""

        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)
            self.register_buffer("k_cache", lib.zeros(1, 16, 8))
            self.register_buffer("v_cache", lib.zeros(1, 16, 8))

        def forward(self, x, pos):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            t = x.shape[1]
            idx = pos + lib.arange(t)
            self.k_cache.index_copy_(1, idx, k)
            self.v_cache.index_copy_(1, idx, v)
            keys, vals = self.k_cache, self.v_cache
            valid = lib.arange(16)[None, :] <= idx[:, None]
            scores = (q @ keys.transpose(1, 2)).masked_fill(~valid, float("-inf"))
            return scores.softmax(-1) @ vals

    return CachedAttn()


def export_kv_cache_buffer_mutation(lib):
    """A KV cache buffer mutated in forward (index_copy_ at a tensor position): ep.module() run
    twice (prefill, then one step) updates the module's buffers like eager."""
    model = _seeded(lib, _kv_cache).eval()
    x = lib.tensor(RNG_KV[:, :4])
    ep = lib.export.export(model, (x, lib.tensor(0)))
    mod = ep.module()
    eager = _seeded(lib, _kv_cache).eval()
    outs = []
    for xs, p in ((RNG_KV[:, :4], 0), (RNG_KV[:, 4:8], 4)):
        got = mod(lib.tensor(xs), lib.tensor(p))
        with lib.no_grad():
            want = eager(lib.tensor(xs), lib.tensor(p))
        outs.append((np.round(_np(got), 4), bool(np.allclose(_np(got), _np(want), atol=1e-5))))
    sig = ep.graph_signature
    return {"outs": outs, "k_cache": np.round(_np(mod.k_cache), 4),
            "buffers": list(sig.buffers), "n_mutated": len(sig.buffers_to_mutate)}


RNG_KV = np.random.default_rng(5).standard_normal((1, 8, 8)).astype(np.float32)


def export_dims_min_max_derived_several_inputs(lib):
    """Dim with min/max and derived dims over three inputs (b, b + 1, 2*b): ranges, a valid
    call at another size and the errors for a size off the relation / out of range."""
    class M(lib.nn.Module):
        def forward(self, x, y, z):
            return x.sum(1)[1:] + y[2:, 0] + z[::2][1:, 0]

    b = lib.export.Dim("b", min=3, max=20)
    x, y, z = lib.randn(5, 4), lib.randn(6, 2), lib.randn(10, 3)
    ep = lib.export.export(M(), (x, y, z), dynamic_shapes=({0: b}, {0: b + 1}, {0: 2 * b}))
    mod = ep.module()
    errors = {}
    for name, shapes in {"ok": ((7, 4), (8, 2), (14, 3)), "rel": ((7, 4), (9, 2), (14, 3)),
                         "hi": ((21, 4), (22, 2), (42, 3)), "lo": ((2, 4), (3, 2), (4, 3))}.items():
        try:
            out = mod(*(lib.ones(*s) for s in shapes))
            errors[name] = ("ok", tuple(out.shape), float(out.sum()))
        except Exception as exc:
            errors[name] = type(exc).__name__
    return {"ranges": sorted(map(str, ep.range_constraints.values())), "calls": errors}


def export_strict_true_and_false(lib):
    """strict=True and strict=False give the same program: outputs, signature, ranges."""
    model = _seeded(lib, _mlp).eval()
    res = {}
    for strict in (True, False):
        ep = lib.export.export(model, (lib.tensor(X4),), dynamic_shapes=({0: lib.export.Dim("b")},), strict=strict)
        res[str(strict)] = {"out": np.round(_np(ep.module()(lib.tensor(X6))), 4),
                            "params": list(ep.graph_signature.parameters),
                            "user_inputs": list(ep.graph_signature.user_inputs),
                            "ranges": sorted(map(str, ep.range_constraints.values()))}
    return res


def export_run_decompositions_empty_table(lib):
    """run_decompositions({}) keeps the program's values, signature and ranges; the original
    program is unchanged."""
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(8, 8)
            self.ln = lib.nn.LayerNorm(8)

        def forward(self, x):
            return lib.nn.functional.silu(self.ln(self.fc(x))).softmax(-1)

    model = _seeded(lib, lambda L: M()).eval()
    ep = lib.export.export(model, (lib.tensor(X4),), dynamic_shapes=({0: lib.export.Dim.AUTO},))
    n_before = len(list(ep.graph.nodes))
    dec = ep.run_decompositions({})
    return {"out": np.round(_np(dec.module()(lib.tensor(X6))), 4),
            "orig_unchanged": len(list(ep.graph.nodes)) == n_before,
            "kinds": [s.kind.name for s in dec.graph_signature.input_specs],
            "user_outputs": len(dec.graph_signature.user_outputs),
            "ranges": sorted(map(str, dec.range_constraints.values())),
            "is_new": dec is not ep}


def export_cond_with_params_dynamic_batch(lib):
    """torch.cond whose branches use the module's parameters, on a dynamic batch; the branch
    taken follows the data at each call."""
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(8, 4)
            self.b = lib.nn.Linear(8, 4)

        def forward(self, x):
            def yes(x):
                return self.a(x).relu()

            def no(x):
                return self.b(x).tanh()

            return lib.cond(x.mean() > 0, yes, no, (x,))

    model = _seeded(lib, lambda L: M()).eval()
    ep = lib.export.export(model, (lib.tensor(X4),), dynamic_shapes=({0: lib.export.Dim("b", max=32)},))
    outs = [np.round(_np(ep.module()(lib.tensor(v))), 4) for v in (np.abs(X6), -np.abs(X6))]
    return {"outs": outs, "params": sorted(ep.graph_signature.parameters)}


def export_save_load_derived_dims_extra_files(lib):
    """save/load round trip of a program with derived dims, with extra files: the loaded
    program keeps ranges, signature and checks, and runs at a new size."""
    class M(lib.nn.Module):
        def forward(self, x, y):
            return lib.cat([x, y[1:]], 0).cumsum(0)

    b = lib.export.Dim("b", max=30)
    ep = lib.export.export(M(), (lib.randn(4, 3), lib.randn(5, 3)), dynamic_shapes=({0: b}, {0: b + 1}))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.pt2")
        lib.export.save(ep, path, extra_files={"cfg.txt": "b<=30"})
        extra = {"cfg.txt": ""}
        loaded = lib.export.load(path, extra_files=extra)
    x, y = lib.tensor(X6[:, :3]), lib.tensor(RNG7)
    try:
        loaded.module()(lib.ones(6, 3), lib.ones(6, 3))
        bad = "no error"
    except Exception as exc:
        bad = type(exc).__name__
    text = extra["cfg.txt"] if isinstance(extra["cfg.txt"], str) else extra["cfg.txt"].decode()
    return {"out": np.round(_np(loaded.module()(x, y)), 4), "extra": text,
            "ranges": sorted(map(str, loaded.range_constraints.values())),
            "user_inputs": list(loaded.graph_signature.user_inputs), "bad": bad}


RNG7 = np.random.default_rng(7).standard_normal((7, 3)).astype(np.float32)


def onnx_dynamo_dynamic_axes_two_sizes(lib):
    """torch.onnx.export(dynamo=True) with the older dynamic_axes= argument; ONNX Runtime runs
    the file at two batch/seq sizes and matches eager."""
    import onnxruntime as ort

    model = _seeded(lib, _rotary).eval()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx")
        lib.onnx.export(model, (lib.tensor(H16), lib.ones(2, 7, dtype=lib.int64)), path, dynamo=True,
                        input_names=["h", "mask"], output_names=["out"],
                        dynamic_axes={"h": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}})
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        res = []
        for h in (H16, H16B):
            m = np.ones(h.shape[:2], dtype=np.int64)
            m[0, -2:] = 0
            got = sess.run(None, {"h": h, "mask": m})[0]
            with lib.no_grad():
                want = _np(model(lib.tensor(h), lib.tensor(m)))
            res.append((got.shape, bool(np.allclose(got, want, atol=1e-4))))
    return {"names": names, "runs": res}


def jit_trace_and_script_functions(lib):
    """jit.trace of a function of two tensors (a tuple out) and jit.script of one with a loop,
    a list and an Optional argument; both rerun at other sizes."""
    def f(x, y):
        return x * y + 1, (x - y).abs().sum()

    traced = lib.jit.trace(f, (lib.tensor(X4), lib.tensor(X4 * 2)))
    a, s = traced(lib.tensor(X6), lib.tensor(X6))

    @lib.jit.script
    def g(x, n: int, bias: Optional[float] = None):  # noqa: F821 - TorchScript resolves Optional
        outs = []
        for i in range(n):
            outs.append(x * i)
        y = lib.stack(outs).sum(0)
        if bias is not None:
            y = y + bias
        return y

    return {"trace": (np.round(_np(a), 4), round(float(s), 4)), "script": np.round(_np(g(lib.tensor(X4), 3)), 4),
            "script_bias": np.round(_np(g(lib.tensor(X4), 2, 0.5)), 4), "traced_type": type(traced).__name__}


def unflatten_nested_call_submodule(lib):
    """torch.export.unflatten of nested submodules: the unflattened tree keeps the names; a
    submodule of it can be called alone; the whole matches ep.module()."""
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.norm = nn.LayerNorm(8)

        def forward(self, x):
            return self.norm(x + self.fc(x).relu())

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return self.head(x)

    model = _seeded(lib, lambda L: Net()).eval()
    ep = lib.export.export(model, (lib.tensor(X4),))
    u = lib.export.unflatten(ep)
    names = sorted((n, type(m).__name__) for n, m in u.named_modules() if n)
    whole = _np(u(lib.tensor(X4)))
    part = _np(getattr(u.blocks, "1")(lib.tensor(X4)))
    with lib.no_grad():
        ref = _np(model.blocks[1](lib.tensor(X4)))
    return {"names": names, "whole": np.round(whole, 4), "same_as_module": bool(np.allclose(
        whole, _np(ep.module()(lib.tensor(X4))), atol=1e-6)), "part_close": bool(np.allclose(part, ref, atol=1e-5))}


def export_sdpa_causal_dynamic_seq(lib):
    """F.scaled_dot_product_attention(is_causal=True) and an arange-built additive mask in one
    exported model with a dynamic sequence length."""
    class M(lib.nn.Module):
        def forward(self, q, k, v):
            t = q.shape[-2]
            a = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            i = lib.arange(t)
            bias = (i[None, :] - i[:, None]).abs().float() * -0.1
            b2 = lib.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            return a + b2

    s = lib.export.Dim("s", max=64)
    q = lib.tensor(np.random.default_rng(2).standard_normal((1, 2, 5, 4)).astype(np.float32))
    # three distinct tensors: torch's graph of export(m, (q, q, q)) reads only the last one (deviations.md)
    ep = lib.export.export(M(), (q, q * 0.5, q + 1), dynamic_shapes=({2: s}, {2: s}, {2: s}))
    q2 = lib.tensor(np.random.default_rng(3).standard_normal((1, 2, 9, 4)).astype(np.float32))
    return {"out": np.round(_np(ep.module()(q2, q2 * 0.5, q2 + 1)), 4),
            "ranges": sorted(map(str, ep.range_constraints.values()))}


def export_error_types_programs_catch(lib):
    """The errors programs catch: data-dependent control flow, a dynamic dim the program
    specializes, a too-big size at call time."""
    out = {}

    class Branch(lib.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    try:
        lib.export.export(Branch(), (lib.tensor(X4),))
        out["branch"] = "no error"
    except Exception as exc:
        out["branch"] = type(exc).__name__

    class Spec(lib.nn.Module):
        def forward(self, x):
            return x.view(4, 8) + 1

    try:
        lib.export.export(Spec(), (lib.tensor(X4),), dynamic_shapes=({0: lib.export.Dim("b")},))
        out["specialized"] = "no error"
    except Exception as exc:
        out["specialized"] = type(exc).__name__
    return out


def export_map_over_batch(lib):
    """torch._higher_order_ops.map over a leading dim with a closure-free body."""
    import importlib

    hop = importlib.import_module(lib.__name__ + "._higher_order_ops")

    class M(lib.nn.Module):
        def forward(self, xs, y):
            return hop.map(lambda x, y: (x * y).sum(-1), xs, y)

    ep = lib.export.export(M(), (lib.tensor(X4), lib.tensor(X4[0])))
    return np.round(_np(ep.module()(lib.tensor(X4 * 2), lib.tensor(X4[1]))), 4)


PROGRAMS = [hf_export_kwargs_dynamic, export_run_decompositions, export_save_load, export_module_wrong_shape,
            export_batchnorm_train_buffers, export_cond, compile_dynamic_true, compile_fullgraph_errors,
            compile_modes, compiler_disable, allow_in_graph, breaks_on_print_and_branch, compile_training_step,
            module_compile_inplace, mark_dynamic_recompiles, onnx_dynamo_ort, jit_script_function,
            jit_trace_and_save, jit_script_module, export_auto_dims_tuple_output, compile_exported_module,
            compile_python_int_argument, explicit_graph_break, export_lstm_dynamic_batch, export_int_of_size,
            unflatten_swap_block, compile_inference_mode, onnx_hf_dynamic_seq, compile_conv_dynamic_hw,
            exported_module_misuse, export_view_batch_flatten, export_derived_dim, compile_side_effects_list,
            compile_sdpa, export_dim_range_and_derived, export_while_loop, export_map,
            export_custom_decomposition_table, export_reexport_module, export_save_extra_files,
            export_nonstrict_number_inputs, export_buffer_mutated_in_forward, export_graph_signature_fields,
            export_draft, onnx_dynamo_cond_and_dims, export_derived_dim_docs_example, export_dim_min_max_calls,
            export_cond_operands_of_several_shapes, export_cond_on_a_dynamic_size, export_decomposed_conv_bn_runs,
            export_print_readable, unflatten_round_trip_and_reexport, export_state_dict_and_constants,
            onnx_dynamo_cond_ort, jit_trace_script_save_entry_points, export_program_accessors,
            export_shapes_collection, export_dims_helper, unflatten_wrong_batch_after_swap,
            export_rotary_causal_attention_dynamic, export_kv_cache_buffer_mutation,
            export_dims_min_max_derived_several_inputs, export_strict_true_and_false,
            export_run_decompositions_empty_table, export_cond_with_params_dynamic_batch,
            export_save_load_derived_dims_extra_files, onnx_dynamo_dynamic_axes_two_sizes,
            jit_trace_and_script_functions, unflatten_nested_call_submodule, export_sdpa_causal_dynamic_seq,
            export_error_types_programs_catch, export_map_over_batch]


# What differs by design (docs/deviations.md): the key of a program's result -> why.
DEVIATIONS = {
    "export_batchnorm_train_buffers": {"mutated": "ember's exported graph is functional: BatchNorm's buffer updates "
                                                  "are BUFFER_MUTATION outputs; torch 2.13 keeps in-place ops"},
    "compile_python_int_argument": {"graphs": "roll's shift reaches the graph as derived ints (size - k), "
                                              "constants: each k compiles (torch: 2 graphs, ember: 4)"},
    "compile_conv_dynamic_hw": {"graphs": "symbolic sizes are recognized by value: at 8x8 an int of the graph "
                                          "equals a size expression and is keyed as it (one more graph; torch: 1)"},
    "export_buffer_mutated_in_forward": {
        "mutated": "ember's exported graph is functional: buffers written in forward are BUFFER_MUTATION "
                   "outputs; torch 2.13 keeps the in-place ops on the buffer placeholders",
        "kinds": "(the same: the BUFFER_MUTATION output specs)"},
    "export_kv_cache_buffer_mutation": {
        "n_mutated": "ember's exported graph is functional: the cache's index_copy_ is a BUFFER_MUTATION "
                     "output; torch 2.13 keeps the in-place op (buffers_to_mutate is empty)"},
    "allow_in_graph": {"my_op_in_graph": "allow_in_graph is accepted with nothing to do: the lazy capture records "
                                         "the ops my_op runs, not one call node"},
}


def comparable(program, result):
    """``result`` less the keys of documented deviations."""
    status, value = result
    drop = DEVIATIONS.get(program.__name__, {})
    if status == "ok" and isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in drop}
    return status, value


def outcome(lib, program):
    try:
        return "ok", program(lib)
    except Exception as exc:
        return "raised", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def same(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.shape(a) == np.shape(b) and np.allclose(a, b, atol=2e-4)
    return a == b


if __name__ == "__main__":
    import sys
    import time
    import warnings

    import torch

    import ember

    warnings.simplefilter("ignore")
    only = sys.argv[1:]
    for program in PROGRAMS:
        if only and program.__name__ not in only:
            continue
        t0 = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            theirs = outcome(torch, program)
        t1 = time.perf_counter()
        mine = outcome(ember, program)
        t2 = time.perf_counter()
        verdict = "SAME" if same(comparable(program, mine), comparable(program, theirs)) else "DIFF"
        if verdict == "SAME" and program.__name__ in DEVIATIONS and not same(mine, theirs):
            verdict = "SAME (but documented: " + "; ".join(DEVIATIONS[program.__name__].values()) + ")"
        print(f"{verdict} {program.__name__} (torch {t1 - t0:.1f}s, ember {t2 - t1:.1f}s)")
        if verdict == "DIFF":
            print("   torch:", theirs)
            print("   ember:", mine)
