"""Autograd corners: each snippet runs on PyTorch and on ember; the outcomes must agree.

grad of non-scalar outputs, backward twice, create_graph, integer outputs, requires_grad on integer
tensors, hooks returning the wrong thing, no_grad/inference_mode nesting, in-place on leaves and views,
the version-counter error.

``ember.testing._snippet_parity`` runs a snippet with the library bound to ``L`` and compares the result
(dtype, shape, contiguity, values) or the exception (type and the first MESSAGE_CHARS characters
of its message).
"""

import pytest

from ember.testing._snippet_parity import snippet_differences

pytest.importorskip("torch")

MESSAGE_CHARS = 60
LEAF = 'a = L.tensor([1., 2., 3.], requires_grad=True)\n'

CASES = [
    'o = L.empty(2, requires_grad=True); L.add(L.ones(2), 1, out=o)',
    'a = L.ones(2, requires_grad=True); o = L.empty(2); L.add(a, 1, out=o)',
    'a = L.ones(2, requires_grad=True); a.add_(1)',
    'a = L.ones(2, requires_grad=True); a[0] = 5',
    'a = L.ones(2, requires_grad=True); a.view(2).add_(1)',
    'a = L.ones(2, requires_grad=True); a[:1].mul_(2)',
    'a = L.ones(2, requires_grad=True); a.data.add_(1); a',
    'a = L.ones(2, requires_grad=True); a.detach().add_(1); a',
    'a = L.ones(2, requires_grad=True)\nwith L.no_grad(): a.add_(1)\na',
    'a = L.ones(2, requires_grad=True); a.zero_()',
    'a = L.ones(2, requires_grad=True); a.requires_grad_(False).add_(1)',
    'a = L.ones(2, requires_grad=True); b = a.detach(); b.add_(1); (a, a._version, b._version)',
    'a = L.ones(2, requires_grad=True); b = a * 1; b.add_(1); b.grad_fn.name()',
    'a = L.ones(2, requires_grad=True); b = a * 1; v = b[:1]; v.mul_(3); (b, type(b.grad_fn).__name__)',
    'a = L.ones(2, requires_grad=True); b = a.sigmoid(); b.mul_(2); b.sum().backward(); a.grad',
    'a = L.ones(2, requires_grad=True); b = a.exp(); c = b * 2; b.add_(1); c.sum().backward(); a.grad',
    'a = L.ones(2, requires_grad=True); b = a.exp(); b.add_(1); b.sum().backward(); a.grad',
    'a = L.ones(2, requires_grad=True); b = a * 1; c = b.sin(); b.mul_(2); c.sum().backward()',
    'a = L.ones(2, requires_grad=True); b = a * 1; c = b ** 2; b[0] = 3.; c.sum().backward()',
    'a = L.ones(2, requires_grad=True); b = a + 0; v = b.view(2); c = v * v; b.zero_(); c.sum().backward()',
    'a = L.ones(3, requires_grad=True); b = a * 2; v = b[1:]; v.mul_(a[1:]); b.sum().backward(); a.grad',
    'a = L.ones(3, requires_grad=True); b = a.clone(); b[0] = a[1] * 3; b.sum().backward(); a.grad',
    'a = L.ones(3, requires_grad=True); b = a.clone(); b[1:] *= 2; b.sum().backward(); (a.grad, b._version)',
    'a = L.ones(2); a.requires_grad_(True); b = L.arange(2.); b.add_(a); (b.requires_grad, type(b.grad_fn).__name__)',
    'x = L.ones(2, requires_grad=True); x.data = L.zeros(3); (x, x.requires_grad)',
    'x = L.ones(2, requires_grad=True); x.data = L.zeros(3, dtype=L.int64); x.dtype',
    LEAF + '(a * 2).backward()',
    LEAF + '(a * 2).backward(L.ones(2))',
    LEAF + '(a * 2).backward(L.ones(3)); a.grad',
    LEAF + '(a * 2).backward(L.ones(3, dtype=L.float64)); a.grad',
    LEAF + '(a * 2).backward(L.ones(1)); a.grad',
    LEAF + '(a * 2).backward(L.ones(3, dtype=L.int64))',
    LEAF + '(a * 2).sum().backward(L.ones(1))',
    LEAF + '(a * 2).sum().backward(L.tensor(2.)); a.grad',
    LEAF + '(a * 2).sum().backward(L.ones(())); a.grad',
    LEAF + 'L.autograd.grad(a * 2, a)',
    LEAF + 'L.autograd.grad((a * 2).sum(), a, L.ones(2))',
    LEAF + 'L.autograd.grad((a * 2).sum(), [])',
    LEAF + 'L.autograd.grad((a*2).sum(), L.ones(3))',
    LEAF + 'L.autograd.grad((a*2).sum(), L.ones(3, requires_grad=True))',
    LEAF + 'L.autograd.grad((a*2).sum(), L.ones(3, requires_grad=True), allow_unused=True)',
    LEAF + 'L.autograd.grad((a*2).sum(), [a, L.ones(3, requires_grad=True)], materialize_grads=True)',
    LEAF + 'L.autograd.grad(L.ones(3).sum(), a)',
    LEAF + 'b = (a * a).sum(); b.backward(); b.backward()',
    LEAF + 'b = (a * a).sum(); b.backward(retain_graph=True); b.backward(); a.grad',
    LEAF + 'b = a.exp().sum(); L.autograd.grad(b, a); L.autograd.grad(b, a)',
    LEAF + 'b = (a * 2).sum(); b.backward(); b.backward()',
    LEAF + 'b = (a + 1).sum(); b.backward(); b.backward(); a.grad',
    LEAF + 'b = a.sum(); b.backward(); b.backward(); a.grad',
    LEAF + 'b = (a ** 3).sum(); g, = L.autograd.grad(b, a, create_graph=True); g.sum().backward(); a.grad',
    LEAF + 'b = (a ** 3).sum(); g, = L.autograd.grad(b, a); g.requires_grad',
    LEAF + 'g, = L.autograd.grad((a ** 3).sum(), a, create_graph=True)\nL.autograd.grad(g.sum(), a)[0]',
    LEAF + 'b = (a.sin()).sum(); b.backward(create_graph=True); a.grad.requires_grad',
    LEAF + 'b = (a.sin()).sum(); b.backward(create_graph=True); (a.grad.sum()).backward(); a.grad',
    LEAF + 'b = (a*2).long(); b.requires_grad',
    LEAF + 'b = (a*2).long(); b.sum().backward()',
    LEAF + 'b = a.argmax(); b.requires_grad',
    LEAF + 'b = (a > 1); b.requires_grad',
    LEAF + 'b = a.round(); b.sum().backward(); a.grad',
    LEAF + 'b = a.sign(); b.sum().backward(); a.grad',
    LEAF + 'L.tensor([1, 2], requires_grad=True)',
    LEAF + 'L.ones(2, dtype=L.int64).requires_grad_()',
    LEAF + 'L.ones(2, dtype=L.int64).requires_grad_(False)',
    LEAF + 'L.ones(2, dtype=L.bool, requires_grad=True)',
    LEAF + 'L.ones(2, dtype=L.complex64, requires_grad=True).requires_grad',
    LEAF + 'L.arange(3, requires_grad=True)',
    LEAF + 'L.zeros(2, dtype=L.int32).requires_grad = True',
    LEAF + 'a.register_hook(lambda g: g[:1]); (a * 2).sum().backward()',
    LEAF + 'a.register_hook(lambda g: g.double()); (a * 2).sum().backward(); a.grad.dtype',
    LEAF + 'a.register_hook(lambda g: 5); (a * 2).sum().backward()',
    LEAF + 'a.register_hook(lambda g: g * 3); (a * 2).sum().backward(); a.grad',
    LEAF + 'b = a * 2; b.register_hook(lambda g: g[:2]); b.sum().backward()',
    LEAF + 'b = a * 2; b.register_hook(lambda g: g.double()); b.sum().backward(); a.grad.dtype',
    LEAF + 'b = a * 2; b.register_hook(lambda g: None); b.sum().backward(); a.grad',
    LEAF + 'L.ones(2).register_hook(lambda g: g)',
    LEAF + 'b = a * 2; b.retain_grad(); b.sum().backward(); b.grad',
    LEAF + 'b = a * 2; b.sum().backward(); b.grad',
    LEAF + 'L.ones(2).retain_grad()',
    LEAF + 'with L.no_grad(): b = a * 2\nb.requires_grad',
    LEAF + 'with L.no_grad():\n    with L.enable_grad(): b = a * 2\nb.requires_grad',
    LEAF + 'with L.inference_mode(): b = a * 2\n(b.requires_grad, b.is_inference())',
    LEAF + 'with L.inference_mode(): b = a * 2\nc = b * a\nc.requires_grad',
    LEAF + 'with L.inference_mode(): b = L.ones(3)\nb.add_(1)',
    LEAF + 'with L.inference_mode(): b = L.ones(3)\nb.requires_grad_()',
    LEAF + 'with L.inference_mode(): b = L.ones(3)\n(b * a).sum().backward(); a.grad',
    LEAF + 'with L.inference_mode(): b = L.ones(3)\nL.autograd.grad((b * a).sum(), a)',
    LEAF + 'with L.inference_mode(): b = L.ones(3)\nc = L.ones(3); c.add_(b); c',
    LEAF + 'with L.inference_mode():\n    with L.no_grad(): b = a * 2\nb.is_inference()',
    LEAF + ('with L.no_grad():\n'
        '    with L.inference_mode(False): b = a * 2\n'
        '(b.requires_grad, b.is_inference())'),
    LEAF + 'with L.inference_mode(): b = L.ones(3)\nb.view(3).is_inference()',
    LEAF + 'c = L.ones(3)\nwith L.inference_mode(): c.add_(1)\nc',
    LEAF + 'c = L.ones(3)\nwith L.inference_mode(): v = c.view(3)\nv.add_(1)',
    LEAF + 'with L.inference_mode(): b = L.ones(3, requires_grad=True)\nb.requires_grad',
    LEAF + 'with L.set_grad_enabled(False): b = a * 2\nb.requires_grad',
    LEAF + 'L.set_grad_enabled(False); b = a * 2; L.set_grad_enabled(True); b.requires_grad',
    LEAF + 'b = a.detach(); b.requires_grad = True; (b * 2).sum().backward(); (a.grad, b.grad)',
    LEAF + 'b = a * 2; b.requires_grad = False',
    LEAF + 'b = a * 2; b.requires_grad_(False)',
    LEAF + 'b = a * 2; b.detach_(); b.requires_grad',
    LEAF + 'a.detach_()',
    LEAF + 'v = a[:1]; v.detach_()',
    LEAF + 'b = a * 1; v = b[:1]; v.detach_()',
    LEAF + 'b = a * 2; b.grad',
    LEAF + 'b = a.view(3); b.backward(L.ones(3)); a.grad',
    LEAF + 'a.grad = L.ones(2)',
    LEAF + 'a.grad = L.ones(3, dtype=L.float64)',
    LEAF + 'a.grad = L.ones(3, dtype=L.int64)',
    LEAF + 'a.grad = L.ones(3); a.grad',
    LEAF + 'L.autograd.backward([a.sum(), (a*2).sum()]); a.grad',
    LEAF + 'L.autograd.backward(a.sum(), inputs=[]); a.grad',
    LEAF + 'b = L.ones(3, requires_grad=True); (a*b).sum().backward(inputs=[a]); (a.grad, b.grad)',
    LEAF + '(a*2).sum().backward(inputs=a); a.grad',
    LEAF + '(a * 2).sum().backward(inputs=[L.ones(3)])',
    LEAF + 'L.autograd.grad((a*2).sum(), a, grad_outputs=L.ones(2))',
    LEAF + 'L.autograd.grad(a*2, a, grad_outputs=L.ones(3), is_grads_batched=False)',
    LEAF + 'L.autograd.grad(a * 2, a, L.ones(3))[0]',
    LEAF + 'L.autograd.grad((a*2).sum(), a)[0].requires_grad',
    LEAF + 'L.autograd.grad((a*a).sum(), a, retain_graph=False, create_graph=True)[0].requires_grad',
    LEAF + 'b = a * 2; b.sum().backward(); b.sum().backward(); a.grad',
    LEAF + 'b = a.relu(); b.sum().backward(); b.sum().backward()',
    LEAF + 'b = a[0] * a[1]; b.backward(); b.backward()',
    LEAF + 'x = a.clone(); x.sum().backward(); a.grad',
    LEAF + 'b = a.to(L.float64); b.sum().backward(); a.grad.dtype',
    LEAF + 'b = a.to(L.int64); b.requires_grad',
    LEAF + 'L.ones(1, requires_grad=True).item()',
    LEAF + 'a.numpy()',
    LEAF + 'a.tolist()',
    LEAF + 'float(a[0])',
    LEAF + 'a.detach().numpy().shape',
    ('a = L.ones(2, requires_grad=True)\n'
        'with L.inference_mode():\n'
        '    with L.inference_mode(False): b = a * 2\n'
        '    c = a * 2\n'
        '(b.requires_grad, b.is_inference(), c.requires_grad, c.is_inference())'),
    ('with L.no_grad():\n'
        '    with L.inference_mode(False): g = (L.is_grad_enabled(), L.is_inference_mode_enabled())\n'
        '    h = L.is_grad_enabled()\n'
        '(g, h)'),
    'with L.inference_mode(False): g = (L.is_grad_enabled(), L.is_inference_mode_enabled())\ng',
    'a = L.ones(3, requires_grad=True); (a*2).sum().backward(inputs=[L.ones(3)])',
    'a = L.ones(3, requires_grad=True); L.autograd.backward((a*2).sum(), inputs=[(a*1).detach()])',
]


@pytest.mark.parametrize("code", CASES)
def test_same_outcome_as_torch(code):
    assert snippet_differences(code, message_chars=MESSAGE_CHARS) == []
