"""Tensor.__hash__ in an optimizer's state lookups (`self.state[p]` for each of 148 parameters, GPT-2's
count): ember beside PyTorch, one thread, medians of alternating rounds.
Run: PYTHONPATH=$(python3 ci/dev_env.py) python3 benchmarks/bench_tensor_hash.py"""
import statistics
import timeit

import torch

import ember


class _PyHashParameter(ember.nn.Parameter):
    """ember's Tensor.__hash__ before session 15: a Python function (the A of the A/B)."""

    def __hash__(self):
        return id(self)


def lookups(lib, cls=None):
    params = [(cls or lib.nn.Parameter)(lib.zeros(2)) for _ in range(148)]
    state = {p: {} for p in params}
    get = state.__getitem__
    return lambda: list(map(get, params))


def main():
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    runs = {"ember": lookups(ember), "ember_pyhash": lookups(ember, _PyHashParameter), "torch": lookups(torch)}
    times = {k: [] for k in runs}
    for _ in range(15):
        for k, fn in runs.items():
            times[k].append(timeit.timeit(fn, number=2000) / 2000)
    med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    print(f"148 state lookups: ember {med['ember']:.2f} us, torch {med['torch']:.2f} us, "
          f"ember/torch {med['ember'] / med['torch']:.2f}; with a Python __hash__ {med['ember_pyhash']:.2f} us "
          f"(native/python {med['ember'] / med['ember_pyhash']:.2f})")


if __name__ == "__main__":
    main()
