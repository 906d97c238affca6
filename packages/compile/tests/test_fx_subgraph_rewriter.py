"""subgraph_rewriter.replace_pattern on torch.fx (oracle) and ember.fx: the docstring example and
the matching rules (distinct placeholders, internal uses, chains, literals), and filters."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.fx
import torch.fx.subgraph_rewriter
from fx_test_helpers import assert_close, full_structure, structure, to_ember, to_torch

import ember
import ember.fx
import ember.fx.subgraph_rewriter

FRAMEWORKS = ((torch, torch.fx, to_torch), (ember, ember.fx, to_ember))


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _rewrite(lib, fx, fn, pattern, replacement):
    gm = fx.symbolic_trace(fn)
    rewriter = torch.fx.subgraph_rewriter if lib is torch else ember.fx.subgraph_rewriter
    matches = rewriter.replace_pattern(gm, pattern, replacement)
    return gm, matches


def _docs_rewrite_program(lib):
    class M(lib.nn.Module):
        def forward(self, x, w1, w2):
            m1 = lib.cat([w1, w2]).sum()
            m2 = lib.cat([w1, w2]).sum()
            return x + lib.max(m1) + lib.max(m2)

    def pattern(w1, w2):
        return lib.cat([w1, w2]).sum()

    def replacement(w1, w2):
        return lib.stack([w1, w2])

    return M, pattern, replacement


def test_replace_pattern_docs_example():
    # torch.fx.subgraph_rewriter.replace_pattern's docstring example.
    results = []
    w1, w2, x = _rand(3), _rand(3, seed=1), _rand(3, seed=2)
    for lib, fx, convert in FRAMEWORKS:
        M, pattern, replacement = _docs_rewrite_program(lib)
        gm = fx.symbolic_trace(M())
        rewriter = torch.fx.subgraph_rewriter if lib is torch else ember.fx.subgraph_rewriter
        matches = rewriter.replace_pattern(gm, pattern, replacement)
        results.append((gm, matches, gm(convert(x), convert(w1), convert(w2))))
    (tgm, tmatches, tout), (egm, ematches, eout) = results
    assert len(ematches) == len(tmatches) == 2
    assert full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout)
    for tm, em in zip(tmatches, ematches, strict=True):
        assert em.anchor.name == tm.anchor.name
        assert {k.name: v.name for k, v in em.nodes_map.items()} == {k.name: v.name for k, v in tm.nodes_map.items()}


@pytest.mark.parametrize("case", ["distinct_placeholders", "internal_use", "chain", "literal"])
def test_replace_pattern_matching_rules(case):
    def program(lib):
        def relu_sigmoid(x):
            return lib.sigmoid(lib.relu(x))

        def tanh(x):
            return lib.tanh(x)

        if case == "distinct_placeholders":  # x + y must not match a + a
            return (lambda a: lib.add(a, a)), (lambda x, y: lib.add(x, y)), (lambda x, y: lib.mul(x, y))
        if case == "internal_use":  # relu is used outside the match: no replacement
            def fn(a):
                r = lib.relu(a)
                return lib.sigmoid(r) + r

            return fn, relu_sigmoid, tanh
        if case == "chain":  # two matches, the second one's input is the first one's output
            def fn(a):
                return lib.sigmoid(lib.relu(lib.sigmoid(lib.relu(a)))) * 2

            return fn, relu_sigmoid, tanh

        def fn(a):  # literal arguments must be equal
            return a.sum(1) + a.sum(2)

        return fn, (lambda x: x.sum(1)), (lambda x: x.mean(1))

    results = []
    x = _rand(2, 3, 3)
    for lib, fx, convert in FRAMEWORKS:
        fn, pattern, replacement = program(lib)
        gm, matches = _rewrite(lib, fx, fn, pattern, replacement)
        gm.graph.lint()
        results.append((gm, matches, gm(convert(x))))
    (tgm, tmatches, tout), (egm, ematches, eout) = results
    assert len(ematches) == len(tmatches)
    assert full_structure(egm) == full_structure(tgm)
    assert_close(eout, tout)
    for tm, em in zip(tmatches, ematches, strict=True):
        assert {k.name: v.name for k, v in em.nodes_map.items()} == {k.name: v.name for k, v in tm.nodes_map.items()}


def test_replace_pattern_with_filters():
    def fn(a):
        return ember.relu(a) + ember.relu(a + 1)

    gm = ember.fx.symbolic_trace(fn)

    def only_on_placeholder_inputs(match, original_graph, pattern_graph):
        return all(getattr(n, "op", None) == "placeholder" for n in match.placeholder_nodes)

    replaced = ember.fx.subgraph_rewriter.replace_pattern_with_filters(
        gm, lambda x: ember.relu(x), lambda x: ember.sigmoid(x), [only_on_placeholder_inputs])
    assert len(replaced) == 1
    # The replacement goes just before the first user of what it replaces (the final add).
    assert [k[1] for k in structure(gm) if k[0] == "call_function"] == ["operator.add", "relu", "sigmoid",
                                                                          "operator.add"]
    assert [n.target for n in replaced[0].replacements] == [ember.sigmoid]


def _matcher_program(lib):
    def fn(a, b):
        x = lib.relu(a)
        y = lib.relu(x)
        z = lib.relu(y)  # relu(relu(.)) ends at y and at z: two overlapping occurrences
        return lib.relu(b) + z

    def pattern(p):
        return lib.relu(lib.relu(p))

    def dead(p):
        unused = lib.relu(p)  # noqa: F841 - dead code in a pattern is refused
        return lib.sigmoid(p)

    return fn, pattern, dead


@pytest.mark.parametrize("options", [{}, {"match_placeholder": True}, {"match_output": True},
                                     {"remove_overlapping_matches": False}], ids=str)
def test_subgraph_matcher_matches_torch(options):
    from torch.fx.passes.utils.matcher_utils import SubgraphMatcher as TorchMatcher

    from ember.fx.passes.utils.matcher_utils import SubgraphMatcher

    found = []
    for lib, fx, matcher_cls in ((torch, torch.fx, TorchMatcher), (ember, ember.fx, SubgraphMatcher)):
        fn, pattern, dead = _matcher_program(lib)
        graph = fx.symbolic_trace(fn).graph
        pattern_graph = fx.symbolic_trace(pattern).graph
        matches = matcher_cls(pattern_graph, **options).match(graph)
        found.append([sorted((k.name, v.name) for k, v in m.nodes_map.items()) for m in matches])
        with pytest.raises(AssertionError, match="dead code"):
            matcher_cls(fx.symbolic_trace(dead).graph)
    assert found[1] == found[0]
    expected_count = {"{}": 1, "{'match_placeholder': True}": 1, "{'match_output': True}": 0,
                      "{'remove_overlapping_matches': False}": 2}[str(options)]
    assert len(found[1]) == expected_count


def _module_replacement_program(lib):
    class Replacement(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = lib.nn.Tanh()

        def forward(self, v):
            return self.act(v)

    def fn(a):
        return lib.relu(a) * 2

    def pattern(v):
        return lib.relu(v)

    return fn, pattern, Replacement()


def test_replacement_module_brings_its_submodules():
    results = []
    x = _rand(2, 4)
    for lib, fx, convert in FRAMEWORKS:
        fn, pattern, replacement = _module_replacement_program(lib)
        gm = fx.symbolic_trace(fn)
        rewriter = torch.fx.subgraph_rewriter if lib is torch else ember.fx.subgraph_rewriter
        rewriter.replace_pattern(gm, pattern, replacement)
        results.append((gm, gm(convert(x))))
    (tgm, tout), (egm, eout) = results
    assert full_structure(egm) == full_structure(tgm)
    assert isinstance(egm.act, ember.nn.Tanh)
    assert_close(eout, tout)
