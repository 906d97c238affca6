"""API-surface parity with PyTorch 2.13 (ci/api_parity.py): every namespace has at least 95% of
PyTorch's public names after the reasoned exclusions of ci/api_parity_exclusions.py, and every
exclusion says why. Signature parity (ci/api_signatures.py): every callable both have with a Python
signature in PyTorch agrees on parameter names, order, kinds and defaults, but for the listed
exceptions, each with its reason."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

pytest.importorskip("torch")

_CI = pathlib.Path(__file__).resolve().parents[1] / "ci"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, _CI / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rows():
    return _module("api_parity").report()


def test_every_namespace_reaches_95_percent(rows):
    low = {ns: (row["coverage"], sorted(row["missing"])) for ns, row in rows.items() if row["coverage"] < 95.0}
    assert not low, f"namespaces under 95% of PyTorch's public names: {low}"


def test_exclusions_give_reasons():
    excluded = _module("api_parity_exclusions").EXCLUDED
    empty = [(ns, n) for ns, names in excluded.items() for n, why in names.items() if not str(why).strip()]
    assert not empty, f"exclusions without a reason: {empty}"


def test_names_found_in_upper_packages():
    """ember.<name> for names the core finds in optional packages (ember-nn, ember-compile)."""
    import torch

    import ember

    assert ember.while_loop is ember._higher_order_ops.while_loop
    out = ember.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (ember.tensor(0), ember.ones(2)))
    ref = torch.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (torch.tensor(0), torch.ones(2)))
    assert int(out[0]) == int(ref[0]) and out[1].tolist() == ref[1].tolist()
    for name in ("grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator", "max_pool3d",
                 "ctc_loss", "embedding_bag"):
        assert callable(getattr(ember, name))


@pytest.fixture(scope="module")
def signatures():
    return _module("api_signatures")


@pytest.fixture(scope="module")
def signature_report(signatures):
    return signatures.report()


def test_signatures_match_pytorch(signatures, signature_report):
    diffs, compared = signature_report
    assert compared > 1000, f"only {compared} signatures compared: the walk over the namespaces broke"
    new = {k: d for k, d in diffs.items() if k not in signatures.EXCEPTIONS}
    assert not new, "signatures that differ from PyTorch's:\n" + "\n".join(f"{k}: {d}" for k, d in sorted(new.items()))


def test_signature_exceptions_are_current(signatures, signature_report):
    """An exception that no longer differs (or whose name went away) is removed from the list."""
    diffs, _ = signature_report
    stale = sorted(k for k in signatures.EXCEPTIONS if k not in diffs)
    assert not stale, f"listed signature exceptions that no longer differ: {stale}"
    assert all(str(why).strip() for why in signatures.EXCEPTIONS.values())


def test_signature_comparison_sees_differences(signatures):
    """The comparison itself: a renamed, reordered, re-kinded or re-defaulted parameter is reported."""
    import inspect

    def ref(input, weight, bias=None, *, reduction="mean"):
        pass

    def same(input, weight, bias=None, *, reduction="mean"):
        pass

    def renamed(x, weight, bias=None, *, reduction="mean"):
        pass

    def kind(input, weight, bias=None, reduction="mean"):
        pass

    def default(input, weight, bias=None, *, reduction="sum"):
        pass

    def required(input, weight, bias, *, reduction="mean"):
        pass

    sig = inspect.signature
    assert signatures.compare(sig(ref), sig(same)) == []
    for other in (renamed, kind, default, required):
        assert signatures.compare(sig(ref), sig(other)), other.__name__
    assert signatures.compare(sig(renamed), sig(ref), method=True) == []  # a method's self is not compared
