"""ember._check and kin against torch's: the error type and message for a false condition, and
what they accept."""

import pytest
import torch

import ember

CASES = [
    ("_check", (False,)),
    ("_check", (False, lambda: "custom message")),
    ("_check", (True,)),
    ("_check", (1,)),
    ("_check_index", (False,)),
    ("_check_value", (False,)),
    ("_check_type", (False, lambda: "bad type")),
    ("_check_not_implemented", (False,)),
    ("_check_with", (KeyError, False, lambda: "key")),
    ("_assert", (False, "message")),
    ("_assert", (True, "message")),
]


def _outcome(fn, args):
    try:
        return "ok", fn(*args)
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize(("name", "args"), CASES)
def test_checks_match_torch(name, args):
    assert _outcome(getattr(ember, name), args) == _outcome(getattr(torch, name), args)


@pytest.mark.parametrize("value", [0, 1])
def test_assert_async_matches_torch(value):
    got = _outcome(ember._assert_async, (ember.tensor(value),))
    assert got == _outcome(torch._assert_async, (torch.tensor(value),))


def test_check_of_a_tensor_is_a_type_error_like_torch():
    got = _outcome(ember._check, (ember.tensor(True),))
    assert got == _outcome(torch._check, (torch.tensor(True),))
