"""The lowered-graph cache: a later process links a cached lowering instead of lowering again,
re-reads constants from the current graph, keys on everything the lowering bakes in, and ignores
entries it must not trust (damaged, or writable by others)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import ember
from ember.compiler.inductor import _compile_fx, _graphcache

# A child process: lowers (or links) a graph with a constant weight and a baked-in scale; prints
# "ok <lowerings>" after checking the compiled result against eager.
CHILD = textwrap.dedent("""
    import sys
    import ember
    from ember import fx, nn
    from ember.compiler.inductor import _compile_fx, compile_fx
    lowerings = []
    original = _compile_fx.GraphLowering.run
    def counting(self):
        lowerings.append(1)
        return original(self)
    _compile_fx.GraphLowering.run = counting
    scale, weight = float(sys.argv[1]), float(sys.argv[2])

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.full((4,), weight), requires_grad=False)
        def forward(self, x):
            return ((x * self.w * scale).sin() + 1).relu().sum(0)

    m = Scaled()
    gm = fx.symbolic_trace(m)
    x = ember.arange(12.0).reshape(3, 4)
    with ember.no_grad():
        fn = compile_fx(gm, [x])
        assert fn.artifact is not None and fn.artifact.kernel_count >= 1
        err = float((fn(x) - m(x)).abs().max())
    assert err < 1e-5, err
    print("ok", len(lowerings))
""")


def _run(cache, scale="0.25", weight="1.5"):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-c", CHILD, scale, weight], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split()


def _entries(cache):
    return sorted((cache / "compile" / "graphs").rglob("*.json"))


@pytest.mark.slow
def test_later_process_links_instead_of_lowering(tmp_path):
    assert _run(tmp_path) == ["ok", "1"]
    entries = _entries(tmp_path)
    assert len(entries) == 1
    assert _run(tmp_path) == ["ok", "0"]  # linked from the entry: no lowering
    # a new weight value (same layout) is read from the module, not baked in: still a hit
    assert _run(tmp_path, weight="-0.75") == ["ok", "0"]
    # a new scale is a constant inside the graph: another key, lowered again, right answer
    assert _run(tmp_path, scale="3.0") == ["ok", "1"]
    assert len(_entries(tmp_path)) == 2


def test_untrusted_or_damaged_entries_are_lowered_again(tmp_path, monkeypatch):
    from ember.compiler import make_fx
    from ember.compiler.inductor import compile_fx

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    lowerings = []
    original = _compile_fx.GraphLowering.run
    monkeypatch.setattr(_compile_fx.GraphLowering, "run", lambda self: (lowerings.append(1), original(self)))

    def f(x):
        return (x.exp() * 0.5 + x).sum(-1)

    x = ember.randn(5, 7)
    gm = make_fx(f)(x)

    def compiled_count():
        fn = compile_fx(gm, [x])
        assert float((fn(x) - f(x)).abs().max()) < 1e-5
        return len(lowerings)

    assert compiled_count() == 1
    assert compiled_count() == 1  # a hit
    (entry,) = _entries(tmp_path)
    os.chmod(entry, 0o666)  # writable by others: someone else could have put code in it
    assert compiled_count() == 2
    (entry,) = _entries(tmp_path)  # rewritten by that lowering, with this user's mode
    assert not entry.stat().st_mode & 0o022
    text = entry.read_text()
    entry.write_text(text[: len(text) // 2])  # truncated
    assert compiled_count() == 3
    data = json.loads(entry.read_text())
    data["objects"] = {"_c0": ["op", "no_such_op_anywhere"]}  # stale: names an op that is gone
    entry.write_text(json.dumps(data))
    assert compiled_count() == 4
    assert compiled_count() == 4  # the rewritten entry is good again


def test_key_covers_what_the_lowering_bakes_in():
    from ember.compiler import make_fx

    x = ember.randn(3, 4)
    gm = make_fx(lambda x: (x * 2).relu())(x)
    key = _graphcache.graph_key(gm, [x])
    assert key == _graphcache.graph_key(gm, [ember.randn(3, 4)])  # values do not matter
    assert key != _graphcache.graph_key(gm, [ember.randn(3, 5)])  # static sizes do
    assert key != _graphcache.graph_key(gm, [ember.randn(4, 3).t()])  # strides do
    assert key != _graphcache.graph_key(gm, [ember.randn(3, 4, dtype=ember.float64)])
    gm3 = make_fx(lambda x: (x * 3).relu())(x)
    assert key != _graphcache.graph_key(gm3, [x])


def test_unnameable_objects_are_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    with pytest.raises(_graphcache.Uncacheable):
        _graphcache.describe(lambda t: t)
    with pytest.raises(_graphcache.Uncacheable):
        _graphcache._value_text(object())
    assert _graphcache.describe(ember.ops.add) == ["op", "add"]
    assert _graphcache.resolve(["op", "add"]) is ember.ops.add
    assert _graphcache.resolve(_graphcache.describe(ember.device("cpu"))) == ember.device("cpu")
    assert _compile_fx.config.graph_cache is True


def test_key_covers_every_setting(monkeypatch):
    from ember.compiler import make_fx
    from ember.compiler.inductor import config

    x = ember.randn(3, 4)
    gm = make_fx(lambda x: (x * 2).relu())(x)
    key = _graphcache.graph_key(gm, [x])
    monkeypatch.setattr(config.cpp, "streaming_min_bytes", 0)
    assert _graphcache.graph_key(gm, [x]) != key
    monkeypatch.undo()
    monkeypatch.setattr(config, "inline_limit", 3)
    assert _graphcache.graph_key(gm, [x]) != key
