"""Capture benchmark: ember.compile vs torch.compile(backend="eager") in one process.

Run from the repository root:
    PYTHONPATH=$(python ci/dev_env.py) python benchmarks/bench_compile_capture.py [--quick]

Both sides use backend="eager" (the captured graph run op by op), so the figures are the
capture machinery itself: the first (compiling) call, a cached call, and the per-call
overhead of a cached call over the plain eager call (ember: re-running Python while recording
plus the cache lookup; PyTorch: guard evaluation). One thread on both sides; CPU time
(``time.process_time``, median), which a loaded shared machine disturbs less than wall time.

- ``tiny``: ``(x * 2 + 1).relu()`` on 8 floats (3 ops).
- ``chain100``: 50 x ``x * 1.01 + 0.5`` on 8 floats (100 ops): per-op trace cost.
- ``mini_gpt``: a 2-layer GPT forward (dim 32, 4 heads, context 16, batch 4).

Then the graph / graph-break / recompile counts of the test programs (explain, counting
backends) beside PyTorch's.

Figures (2026-12-01, shared 2-core x86_64 machine under load ~10, wall clock, +-30%):
see the table this script prints; the README of packages/compile quotes the last run.
"""

from __future__ import annotations

import sys
import time

import torch

import ember


def _median(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    times.sort()
    return times[len(times) // 2]


def _first_and_cached(lib, fn, args, repeat):
    if lib is torch:
        torch._dynamo.reset()
    compiled = lib.compile(fn, backend="eager")
    t = time.process_time()
    compiled(*args)
    first = time.process_time() - t
    for _ in range(3):
        compiled(*args)
    cached = _median(lambda: compiled(*args), repeat)
    eager = _median(lambda: fn(*args), repeat)
    return first, cached, eager


def _tiny(lib):
    return lambda x: (x * 2 + 1).relu()


def _chain(lib):
    def f(x):
        for _ in range(50):
            x = x * 1.01 + 0.5
        return x
    return f


def _gpt(lib, dim=32, heads=4, layers=2, ctx=16, vocab=64):
    nn = lib.nn
    lib.manual_seed(0)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, dim)
            self.pos = nn.Embedding(ctx, dim)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
                for _ in range(layers))
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)

        def forward(self, idx):
            t = idx.shape[1]
            h = self.tok(idx) + self.pos(lib.arange(t))
            mask = nn.Transformer.generate_square_subsequent_mask(t)
            for block in self.blocks:
                h = block(h, src_mask=mask, is_causal=True)
            return self.head(self.norm(h))

    model = GPT().eval()
    return model


class _Counter:
    def __init__(self):
        self.n = 0

    def __call__(self, gm, example_inputs):
        self.n += 1
        return gm.forward


def _count_programs():
    def item_break(lib):
        def f(x):
            y = x.cos()
            return y * y.sum().item()
        return f

    def data_if(lib):
        def f(x):
            if x.sum() > 0:
                return x + 1
            return x - 1
        return f

    def print_text(lib):
        def f(x):
            print("", end="")
            return x * 2
        return f

    def print_tensor(lib):
        def f(x):
            y = x * 2
            print(y, file=open("/dev/null", "w"))  # noqa: SIM115
            return y + 1
        return f

    def shapes(lib):
        def f(x):
            return x.sum(1) + lib.ones(x.shape[0])
        return f

    programs = [("item() break", item_break, [(4,)]), ("data-dependent if", data_if, [(4,), (4,)]),
                ("print(text)", print_text, [(4,)]), ("print(tensor)", print_tensor, [(4,)]),
                ("sizes 4,5,6,9", shapes, [(4, 3), (5, 3), (6, 3), (9, 3)])]
    rows = []
    for name, program, shapes_list in programs:
        counts = []
        for lib in (ember, torch):
            if lib is torch:
                torch._dynamo.reset()
            counter = _Counter()
            fn = lib.compile(program(lib), backend=counter)
            for i, shape in enumerate(shapes_list):
                x = lib.ones(shape) if i % 2 == 0 else -lib.ones(shape)
                fn(x)
            counts.append(counter.n)
        ex_e = ember.compiler.explain(program(ember))(ember.ones(shapes_list[0]))
        ex_t = torch._dynamo.explain(program(torch))(torch.ones(shapes_list[0]))
        rows.append((name, counts[0], counts[1], ex_e.graph_break_count, ex_t.graph_break_count))
    return rows


def main(quick: bool) -> None:
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    # Warm both stacks (imports, first-use initialization) so "first" is the compile itself.
    for lib in (ember, torch):
        lib.compile(lambda x: x.sin() + 1, backend="eager")(lib.ones(2))
    repeat = 50 if quick else 300
    cases = [("tiny", _tiny, lambda lib: (lib.ones(8),), repeat),
             ("chain100", _chain, lambda lib: (lib.ones(8),), max(repeat // 10, 10)),
             ("mini_gpt", lambda lib: _gpt(lib), lambda lib: (lib.randint(0, 64, (4, 16)),),
              max(repeat // 10, 10))]
    print("| case | ember first | torch first | ember cached | torch cached | ratio cached | "
          "ember overhead/call | torch overhead/call |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, build, make_args, n in cases:
        res = {}
        for lib in (ember, torch):
            fn = build(lib)
            with (lib.no_grad()):
                res[lib] = _first_and_cached(lib, fn, make_args(lib), n)
        (ef, ec, ee), (tf, tc, te) = res[ember], res[torch]
        print(f"| {name} | {ef * 1e3:.1f} ms | {tf * 1e3:.1f} ms | {ec * 1e6:.0f} us | {tc * 1e6:.0f} us | "
              f"{ec / tc:.2f} | {(ec - ee) * 1e6:.0f} us | {(tc - te) * 1e6:.0f} us |")
    print()
    print("| program | ember graphs | torch graphs | ember breaks | torch breaks |")
    print("| --- | --- | --- | --- | --- |")
    for row in _count_programs():
        print("| {} | {} | {} | {} | {} |".format(*row))


if __name__ == "__main__":
    main("--quick" in sys.argv)
