"""The ordinary compile/export programs of ``user_programs.py`` under torch 2.13 and ember: each
program's result (values, counts, error types) must agree, less the documented deviations."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
import user_programs as up

import ember

# torch.compile/export of these take many seconds on the shared 2-core machine
SLOW = {"hf_export_kwargs_dynamic", "compile_modes", "compile_inference_mode", "compile_exported_module",
        "compile_training_step", "onnx_dynamo_ort", "export_batchnorm_train_buffers", "export_cond",
        "onnx_hf_dynamic_seq", "compile_sdpa", "onnx_dynamo_cond_and_dims", "export_map", "onnx_dynamo_cond_ort",
        "export_rotary_causal_attention_dynamic", "onnx_dynamo_dynamic_axes_two_sizes", "export_map_over_batch"}


def _params():
    for program in up.PROGRAMS:
        marks = [pytest.mark.slow] if program.__name__ in SLOW else []
        yield pytest.param(program, id=program.__name__, marks=marks)


@pytest.mark.parametrize("program", list(_params()))
def test_program_agrees_with_torch(program):
    if program in (up.onnx_dynamo_ort, up.onnx_hf_dynamic_seq, up.onnx_dynamo_cond_and_dims, up.onnx_dynamo_cond_ort,
                   up.onnx_dynamo_dynamic_axes_two_sizes):
        pytest.importorskip("onnxscript")  # torch.onnx.export(dynamo=True) needs it
        pytest.importorskip("onnxruntime")
    with contextlib.redirect_stderr(io.StringIO()):
        theirs = up.outcome(torch, program)
    mine = up.outcome(ember, program)
    assert theirs[0] == "ok", theirs
    assert up.same(up.comparable(program, mine), up.comparable(program, theirs)), (mine, theirs)
