"""PyTorch programs run twice, with PyTorch and with ``import ember as torch``, printing the same lines.

Each program under ``tests/programs/`` is an ordinary PyTorch script (pytorch/examples programs written
from memory, common training idioms, hostile inputs). ``_driver.py`` runs all of them in one process
per library (ember stands in for ``torch`` in ``sys.modules``, so ``import torch.nn as nn`` gives
ember.nn); the seeded programs print losses that must agree within float rounding, since ember's CPU
generator draws PyTorch's random streams. ``hostile_inputs.py`` prints, per case, a result or the
exception's type and message: the types must be PyTorch's, the messages too except where listed below.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "programs"
sys.path.insert(0, str(HERE))
from _compare import differences, hostile_cases, hostile_problems, run_under_both  # noqa: E402

# spec: program[:comma-separated argv]
PROGRAMS = [
    "mnist.py",
    "word_language_model.py",
    "word_language_model.py:--model,GRU,--tied",
    "word_language_model.py:--model,RNN_RELU,--epochs,1",
    "word_language_model.py:--model,Transformer,--lr,0.5",
    "time_sequence_prediction.py",
    "super_resolution.py",
    "fast_neural_style.py",
    "siamese_network.py",
    "reinforcement_learning.py",
    "vae.py",
    "dcgan.py",
    "regression.py",
    "data_pipeline.py",
    "autograd_function.py",
    "hooks_state_dict.py",
    "amp_ema_accumulation.py",
    "amp_cnn_batchnorm.py",
    "einsum_attention.py",
    "distributions_program.py",
    "complex_fft.py",
    "sparse_program.py",
    "custom_training_idioms.py",
    "gradient_tricks.py",
    "nanogpt.py",
    "dataloader_workers.py",
    "seq2seq_attention.py",
    "names_classification.py",
    "func_transforms.py",
    "parametrize_prune_swa.py",
    "sequence_models.py",
    "linalg_distributions.py",
    "jit_compile_resume.py",
    "pytree_program.py",
    "flop_counting.py",
    "resnet_gan.py",
    "unet_vit.py",
    "distill_custom_ops.py",
    "special_masked_signal.py",
    "transformer_translation.py",
    "graph_neural_net.py",
    "contrastive_recommender.py",
    "optimizers_schedulers.py",
    "flows_diffusion.py",
    "init_hooks_checkpointing.py",
    "vision_stn_mobilenet.py",
    "detection_moe.py",
    "ppo_sac_beam_search.py",
    "module_repr_serialization.py",
    "bert_mlm.py",
    "export_deploy.py",
]
HOSTILE = "hostile_inputs.py"

# Hostile cases whose exception type is PyTorch's but whose message deliberately is not.
MESSAGE_DIFFERS = {
    "to bad device": "ember lists the device types it has (cpu, cuda, meta, mps, xpu)",
    "bernoulli p>1": "PyTorch's text is an internal check's ('Expected p_in >= 0 && p_in <= 1 to be true')",
    "zeros size float": "PyTorch's argument parser names the function; ember's size check does not know it",
    "from_numpy object array": "ember has no uint16/32/64, so its list of supported types lacks them",
    "from_numpy unsupported dtype": "as above",
    "load evil weights_only": "ember's own weights-only unpickler (docs/deviations.md, Checkpoints) names the "
                              "refused global instead of PyTorch's instructions",
    "load custom class": "as above",
    "load truncated": "ember's zip reader reports the damage in its words",
    "load garbage": "as above (still UnpicklingError as PyTorch's)",
    "load empty": "as above (still EOFError)",
    "load plain pickle of list": "as above (still UnpicklingError)",
    "load plain pickle evil": "as above (still UnpicklingError)",
    "sample_n negative": "PyTorch's text comes from numel's overflow check on the negative size; ember's expand "
                         "names the size",
    "autocast bad device": "as 'to bad device'",
    "sdpa q k head dim mismatch": "PyTorch's text is its bmm's (the math path's); ember checks the shapes first",
    "sdpa int inputs": "PyTorch's text is a kernel's dtype check; ember's says what it wants",
    "stft n_fft too big": "PyTorch's text starts with a repr of the whole call (stft(torch.FloatTensor[8], ...)); "
                          "ember's has the same check after 'stft: '",
    "stft window wrong length": "as above",
    "gammainc float other": "ember's special.gammainc is igamma itself, whose argument check names igamma",
    "custom_op returns its input": "PyTorch names the module of its own wrapper; ember the kernel's module",
    "load weights_only module": "as 'load custom class'",
    "meshgrid 2d input": "PyTorch's text prints the offending tensor with its C++ printer",
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    pytest.importorskip("torch")
    return run_under_both([*PROGRAMS, HOSTILE], tmp_path_factory.mktemp("programs"))


@pytest.mark.parametrize("spec", PROGRAMS)
def test_program_prints_what_pytorch_prints(outputs, spec):
    theirs, ours = outputs["torch"][spec], outputs["ember"][spec]
    assert "!! " not in theirs, f"the program fails under PyTorch itself:\n{theirs}"
    diff = differences(theirs, ours)
    assert not diff, "\n".join(diff) + f"\n--- ember's output:\n{ours}"


def test_hostile_inputs_raise_what_pytorch_raises(outputs):
    problems = hostile_problems(outputs["torch"][HOSTILE], outputs["ember"][HOSTILE], MESSAGE_DIFFERS, 100)
    assert not problems, "\n".join(problems)


def test_message_exceptions_name_existing_cases(outputs):
    assert set(MESSAGE_DIFFERS) <= set(hostile_cases(outputs["torch"][HOSTILE]))
