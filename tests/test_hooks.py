"""Tensor.register_hook: PyTorch's tensor hooks, on leaves and computed tensors, compared with torch."""
import numpy as np
import pytest
import torch

import mytorch as T
from mytorch import tensor


def _run(lib, make):
    "Hooks on a leaf used twice and on a computed tensor that retains its grad; returns what each saw and the grads."
    x = make([1.0, 2.0])
    seen = []
    h = x * x
    h.register_hook(lambda g: seen.append(('h', g.tolist())))
    h.retain_grad()
    h.register_hook(lambda g: g * 10.0)
    x.register_hook(lambda g: seen.append(('x', g.tolist())) or g + 1.0)
    ((h * 3.0) + x * 2.0).sum().backward()
    return seen, h.grad.tolist(), x.grad.tolist()


def test_hooks_match_torch():
    ours = _run(T, lambda v: tensor(v, requires_grad=True))
    theirs = _run(torch, lambda v: torch.tensor(v, requires_grad=True))
    assert ours == theirs
    assert ours[0] == [('h', [3.0, 3.0]), ('x', [62.0, 122.0])]   # the leaf's hook sees the summed gradient, once


def test_remove_and_handle():
    x = tensor([1.0, 2.0], requires_grad=True)
    handle = x.register_hook(lambda g: g * 0.0)
    handle.remove(); handle.remove()
    (x * 3.0).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    with x.register_hook(lambda g: g * 0.0):
        pass
    x.grad = None
    (x * 3.0).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_hooks_apply_to_autograd_grad_as_in_torch():
    for lib, make in ((T, lambda v: tensor(v, requires_grad=True)), (torch, lambda v: torch.tensor(v, requires_grad=True))):
        x = make([1.0, 2.0])
        x.register_hook(lambda g: g * 2.0)
        assert lib.autograd.grad((x * 3.0).sum(), x)[0].tolist() == [6.0, 6.0]
        y = x * 3.0
        y.register_hook(lambda g: g * 5.0)
        assert lib.autograd.grad(y.sum(), y)[0].tolist() == [5.0, 5.0]


def test_hook_on_value_before_an_in_place_change():
    for make in (lambda v: tensor(v, requires_grad=True), lambda v: torch.tensor(v, requires_grad=True)):
        x = make([1.0, 2.0])
        y = x * 1.0
        seen = []
        y.register_hook(lambda g: seen.append(g.tolist()))
        z = y + 2.0
        y.add_(1.0)
        (z * 2.0 + y).sum().backward()
        assert seen == [[3.0, 3.0]] and x.grad.tolist() == [3.0, 3.0]


def test_double_backward_through_a_hook():
    x = tensor([1.0, 2.0], dtype=T.float64, requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g * 3.0)
    (gx,) = T.autograd.grad(y.sum(), x, create_graph=True)
    assert gx.tolist() == [6.0, 12.0]
    (ggx,) = T.autograd.grad(gx.sum(), x)
    assert ggx.tolist() == [6.0, 6.0]


def test_errors_as_in_torch():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        torch.tensor([1.0]).register_hook(print)
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        tensor([1.0]).register_hook(print)
    x = tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    y.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match="has changed the size of value"):
        y.sum().backward()
    x = tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g.double())
    with pytest.raises(RuntimeError, match="has changed the type of value"):
        (x * 1.0).sum().backward()
    y = tensor([1.0], requires_grad=True) * 1.0
    y.register_hook(lambda g: 'no')
    with pytest.raises(TypeError, match="expected a Tensor"):
        y.sum().backward()


def test_leaf_hooks_are_forgotten_with_the_leaf():
    import gc
    from mytorch import engine
    gc.collect()   # leaves from earlier tests, in reference cycles, go now rather than during the count below
    before = len(engine._leaf_hooks)
    x = tensor([1.0], requires_grad=True)
    x.register_hook(lambda g: g)
    assert len(engine._leaf_hooks) == before + 1
    del x; gc.collect()
    assert len(engine._leaf_hooks) == before
