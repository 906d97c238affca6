"""Programs with ``assert`` on tensors, in a module pytest does not rewrite (its assertion
rewriting would turn the statements into other bytecode than the user's program has)."""


def assert_passes(lib):
    def f(x):
        y = x * 2
        assert y.sum() > -100, "bad"
        return y + 1

    return f


def assert_fails(x):
    assert x.sum() > 100, "too small"
    return x + 1
