"""``_inductor.utils.fresh_inductor_cache`` / ``clear_inductor_caches`` and ``_inductor.cudagraph_mark_step_begin``
against torch 2.13 (environment, directory lifetime, errors) and ember's compiler (where it writes)."""

from __future__ import annotations

import os

import pytest
import torch
import torch._inductor.utils

import ember
import ember._inductor.utils


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
@pytest.mark.parametrize("delete", [True, False])
def test_fresh_cache_sets_and_restores_the_cache_variables(lib, delete, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/previous")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    entries: dict = {}
    with lib._inductor.utils.fresh_inductor_cache(cache_entries=entries, dir=str(tmp_path), delete=delete) as got:
        assert got is None
        fresh = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        assert os.path.dirname(fresh) == str(tmp_path) and os.path.isdir(fresh) and not os.listdir(fresh)
        assert os.environ["TRITON_CACHE_DIR"] == os.path.join(fresh, "triton")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/previous" and "TRITON_CACHE_DIR" not in os.environ
    assert os.path.isdir(fresh) is (not delete)
    assert entries == {}


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_fresh_cache_wants_an_empty_entries_dict_and_keeps_the_dir_on_error(lib, tmp_path):
    with pytest.raises(AssertionError, match="^expected empty cache_entries dict$"):
        with lib._inductor.utils.fresh_cache(cache_entries={"x": 1}, dir=str(tmp_path)):
            pass
    assert len(os.listdir(tmp_path)) == 1  # kept for inspection, as torch
    with pytest.raises(ValueError, match="inside"):
        with lib._inductor.utils.fresh_cache(dir=str(tmp_path)):
            raise ValueError("inside")
    assert len(os.listdir(tmp_path)) == 2


def test_ember_compiles_anew_into_the_fresh_directory(tmp_path):
    def f(x):
        return (x.sin() * 2 + 1).sum()

    with ember._inductor.utils.fresh_inductor_cache(dir=str(tmp_path)):
        fresh = os.environ["EMBER_CACHE_DIR"]
        out = ember.compile(f)(ember.ones(5))
        written = [name for _, _, names in os.walk(fresh) for name in names]
        assert any(name.endswith(".so") for name in written)
    ember.testing.assert_close(out, f(ember.ones(5)))
    assert not os.path.exists(fresh)
    assert ember._inductor.utils.clear_inductor_caches() is None


def test_cudagraph_mark_step_begin_is_the_compiler_one():
    assert ember._inductor.cudagraph_mark_step_begin is ember.compiler.cudagraph_mark_step_begin
    assert ember._inductor.cudagraph_mark_step_begin() is None
