"""Which modules' forwards are running while ops are recorded (``node.meta["nn_module_stack"]``).

``track_module_calls(root)`` keeps ``CURRENT[0]`` equal to the chain of module calls from
``root`` down to the innermost running one, as a tuple of ``(key, (path, class name))`` pairs
in PyTorch's spelling (``"L__self__layers.0"``, ``("layers.0", "__main__.Block")``). The
recorder stores a reference to that tuple with every op it records while stacks are wanted,
so it costs one attribute read per op. A module reached under several names (a shared
block) takes its names in turn, one per call; the second and later calls of one name are keyed
``"L__self__fc@1"``, ``"@2"`` ... as PyTorch's are (unflatten tells the calls apart by key).
"""

from __future__ import annotations

import contextlib

CURRENT: list = [()]


def _class_name(module) -> str:
    cls = type(module)
    return f"{cls.__module__}.{cls.__qualname__}"


@contextlib.contextmanager
def track_module_calls(root):
    """Maintains ``CURRENT[0]`` while ``root`` (and the modules under it) run."""
    from ember.nn.modules import module as module_mod

    names: dict = {}
    for name, sub in root.named_modules(remove_duplicate=False):
        names.setdefault(id(sub), []).append(name)
    calls: dict = {}
    pushed: list = []

    def pre_hook(module, args):
        paths = names.get(id(module))
        if paths is None:  # a module built during the forward, or not under root
            pushed.append(False)
            return
        count = calls.get(id(module), 0)
        calls[id(module)] = count + 1
        path = paths[count % len(paths)]
        again = count // len(paths)
        key = "L__self__" + path + (f"@{again}" if again else "")
        CURRENT[0] = (*CURRENT[0], (key, (path, _class_name(module))))
        pushed.append(True)

    def post_hook(module, args, output):
        if pushed and pushed.pop():
            CURRENT[0] = CURRENT[0][:-1]

    saved = CURRENT[0]
    CURRENT[0] = ()
    handles = [module_mod.register_module_forward_pre_hook(pre_hook),
               module_mod.register_module_forward_hook(post_hook, always_call=True)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        CURRENT[0] = saved
