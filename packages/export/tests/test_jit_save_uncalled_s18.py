"""``jit.save`` of a scripted module before any call (torch saves it; ember needs inputs: deviations.md)."""

import io

import pytest

import ember


class _M(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x).relu()


def test_save_before_any_call_raises_saying_what_to_do():
    with pytest.raises(RuntimeError, match="no example inputs yet: call it once, or pass example_inputs"):
        ember.jit.save(ember.jit.script(_M()), io.BytesIO())


@pytest.mark.parametrize("how", ["call", "example_inputs"])
def test_after_a_call_or_with_example_inputs_it_saves_with_a_dynamic_batch(how):
    m = _M()
    x = ember.randn(4, 3)
    if how == "call":
        s = ember.jit.script(m)
        s(x)
    else:
        s = ember.jit.script(m, example_inputs=[(x,)])
    buf = io.BytesIO()
    ember.jit.save(s, buf)
    buf.seek(0)
    loaded = ember.jit.load(buf)
    y = ember.randn(7, 3)
    assert ember.allclose(loaded(y), m(y))
