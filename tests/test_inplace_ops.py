"""Python's augmented operators are PyTorch's in-place ops; floor_divide, remainder, fmod and copy_ match torch."""
import numpy as np
import pytest
import torch

import mytorch as T
from mytorch import tensor, no_grad, set_math_policy
from mytorch.scalar import DomainError
from mytorch.gradient_check import gradcheck, gradgradcheck, jvpcheck

F64 = T.float64


def test_augmented_operators_write_in_place_and_aliases_see_it():
    for op, expected in [('__iadd__', [3., 4.]), ('__isub__', [-1., 0.]), ('__imul__', [2., 4.]),
                         ('__itruediv__', [.5, 1.]), ('__ipow__', [1., 4.]), ('__ifloordiv__', [0., 1.]),
                         ('__imod__', [1., 0.])]:
        x = tensor([1.0, 2.0])
        alias, version = x, x._version
        out = getattr(x, op)(2)
        assert out is alias, op
        assert alias.tolist() == expected, op
        assert x._version == version + 1, op


def test_plus_equals_statement_keeps_identity():
    x = tensor([1.0, 2.0]); alias = x
    x += 1
    x -= 0.5
    x *= 2
    assert x is alias and alias.tolist() == [3.0, 5.0]


def test_optimizer_step_keeps_the_same_leaf():
    w = tensor([0.5, -1.0], dtype=F64, requires_grad=True)
    (w * w).backward(tensor(np.ones(2)))
    p = w
    with no_grad(): w -= 0.1 * w.grad
    assert w is p and w.is_leaf and w.requires_grad
    np.testing.assert_allclose(w.detach().numpy(), [0.4, -0.8])


@pytest.mark.parametrize('op', ['__iadd__', '__isub__', '__imul__', '__itruediv__', '__ipow__', '__ifloordiv__', '__imod__'])
def test_leaf_that_requires_grad_is_refused_as_in_torch(op):
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        getattr(torch.tensor([1.0, 2.0], requires_grad=True), op)(2)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        getattr(tensor([1.0, 2.0], requires_grad=True), op)(2)


def _chain(lib, x, b):
    y = x * 1.0
    y *= x; y += b; y -= 0.25; y /= b; y **= 2; y %= 3.0
    return y


def test_non_leaf_records_and_gradients_match_torch():
    rng = np.random.default_rng(0)
    xn, bn = rng.uniform(0.5, 1.5, 5), rng.uniform(0.7, 1.3, 5)
    x, b = tensor(xn, requires_grad=True), tensor(bn, requires_grad=True)
    tx, tb = torch.tensor(xn, requires_grad=True), torch.tensor(bn, requires_grad=True)
    y, ty = _chain(T, x, b), _chain(torch, tx, tb)
    assert y.grad_fn.name() == 'RemainderBackward'
    v = rng.standard_normal(5)
    y.backward(tensor(v)); ty.backward(torch.tensor(v))
    tol = 64 * np.finfo(np.float64).eps
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=tol)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=tol)


def test_integer_tensor_refuses_a_float_result_and_keeps_integer_ones():
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        torch.tensor([1, 2]).__iadd__(1.5)
    n = tensor([1, 2])
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        n += 1.5
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        n /= 2
    n //= 2
    assert n.tolist() == [0, 1] and n.dtype == np.int64


def test_unknown_operand_gives_pythons_type_error():
    x = tensor([1.0])
    with pytest.raises(TypeError, match=r"\+="):
        x += 'one'
    with pytest.raises(TypeError, match="%="):
        x %= [1]


# --- floor_divide, remainder, fmod ---

def test_conventions_match_torch_on_integers_and_floats():
    rng = np.random.default_rng(1)
    a, b = rng.integers(-30, 30, 200), rng.choice([-7, -3, -1, 1, 2, 5], 200)
    fa, fb = rng.uniform(-10, 10, 200), rng.uniform(-3, 3, 200)
    for op in ('floor_divide', 'remainder', 'fmod'):
        for x, y in ((a, b), (fa, fb), (a, 2.5), (fa, -1.5)):
            mine = getattr(T, op)(tensor(x), tensor(y) if isinstance(y, np.ndarray) else y)
            ref = getattr(torch, op)(torch.tensor(x), torch.tensor(y) if isinstance(y, np.ndarray) else y)
            np.testing.assert_array_equal(mine.numpy(), ref.numpy(), err_msg=op)
            assert mine.dtype == ref.numpy().dtype, op


def test_operators_and_reflected_forms():
    a = tensor([-7, 7])
    assert (a // 2).tolist() == [-4, 3] and (a % 2).tolist() == [1, 1]
    assert (17 // tensor([5, -5])).tolist() == [3, -4] and (17 % tensor([5, -5])).tolist() == [2, -3]
    assert T.remainder(17, tensor([5, -5])).tolist() == [2, -3]
    assert T.floor_divide(17, tensor([5, -5])).tolist() == [3, -4]
    with pytest.raises(TypeError):
        T.fmod(2, tensor([1.5]))          # torch.fmod(2, t) is a TypeError too


def test_integer_division_by_zero_raises_as_in_torch():
    for op in ('floor_divide', 'remainder', 'fmod'):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            getattr(torch, op)(torch.tensor([3, 4]), torch.tensor([0, 1]))
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            getattr(T, op)(tensor([3, 4]), tensor([0, 1]))


def test_float_zero_divisor_raises_by_default_and_gives_torch_values_under_nan_policy():
    x, z = np.array([3.0, -4.0, 0.0]), np.zeros(3)
    for op in ('floor_divide', 'remainder', 'fmod'):
        with pytest.raises(DomainError, match="divisor must be nonzero"):
            getattr(T, op)(tensor(x), tensor(z))
        with set_math_policy('nan'):
            mine = getattr(T, op)(tensor(x), tensor(z)).numpy()
        np.testing.assert_array_equal(mine, getattr(torch, op)(torch.tensor(x), torch.tensor(z)).numpy(), err_msg=op)


def test_bool_quotient_is_refused():
    with pytest.raises(NotImplementedError):
        torch.tensor([True]) // torch.tensor([True])
    with pytest.raises(NotImplementedError, match="not implemented for bool"):
        tensor([True]) // tensor([True])


def _away_from_jumps(rng):
    x = rng.uniform(-4, 4, (2, 3)); y = rng.uniform(0.6, 1.7, 3) * np.array([1, -1, 1])
    q = x / y
    assert np.abs(q - np.round(q)).min() > 1e-2
    return x, y


@pytest.mark.parametrize('op', ['remainder', 'fmod'])
def test_gradients_match_torch_and_finite_differences(op):
    x, y = _away_from_jumps(np.random.default_rng(3))
    f = lambda a, b: getattr(a, op)(b)
    assert gradcheck(f, [tensor(x, requires_grad=True), tensor(y, requires_grad=True)])
    assert gradgradcheck(f, [tensor(x, requires_grad=True), tensor(y, requires_grad=True)])
    assert jvpcheck(f, [tensor(x), tensor(y)]) <= 1e-12
    a, b = tensor(x, requires_grad=True), tensor(y, requires_grad=True)
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    v = np.random.default_rng(4).standard_normal((2, 3))
    f(a, b).backward(tensor(v)); f(ta, tb).backward(torch.tensor(v))
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())


def test_floor_divide_records_but_refuses_backward_as_in_torch():
    x = tensor([1.5, -2.5], dtype=F64, requires_grad=True)
    y = x // 1.0
    assert y.requires_grad and torch.floor_divide(torch.tensor([1.5], requires_grad=True), 1.0).requires_grad
    with pytest.raises(RuntimeError, match="derivative for floor_divide is not implemented"):
        y.backward(tensor(np.ones(2)))


# --- copy_ ---

def test_copy_broadcasts_casts_and_differentiates_like_torch():
    rown = np.array([1.0, 2.0, 3.0])
    x, row = tensor(np.ones((2, 3)), requires_grad=True), tensor(rown, requires_grad=True)
    tx, trow = torch.ones((2, 3), dtype=torch.float64, requires_grad=True), torch.tensor(rown, requires_grad=True)
    y, ty = x * 2.0, tx * 2.0
    y.copy_(row); ty.copy_(trow)
    w = np.arange(6.0).reshape(2, 3)
    (y * tensor(w)).backward(tensor(np.ones((2, 3)))); (ty * torch.tensor(w)).backward(torch.ones(2, 3, dtype=torch.float64))
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_array_equal(row.grad.numpy(), trow.grad.numpy())


def test_copy_into_integer_truncates_and_plain_buffer_joins_the_graph():
    n = tensor([0, 0, 0]); n.copy_(tensor([1.7, -1.7, 2.5]))
    t = torch.tensor([0, 0, 0]); t.copy_(torch.tensor([1.7, -1.7, 2.5]))
    assert n.tolist() == t.tolist()
    buf = tensor(np.zeros(3), dtype=T.float32)
    src = tensor(np.ones(3), requires_grad=True)
    buf.copy_(src)
    assert buf.requires_grad and buf.dtype == T.float32
    buf.backward(tensor(np.ones(3), dtype=T.float32))
    assert src.grad.dtype == F64 and src.grad.tolist() == [1.0, 1.0, 1.0]
    assert tensor(np.zeros(2)).copy_(1.5).tolist() == [1.5, 1.5]


def test_copy_errors():
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        tensor(np.zeros(3)).copy_(tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        tensor([1.0, 2.0], requires_grad=True).copy_(tensor([0.0, 0.0]))
    w = tensor([1.0, 2.0], requires_grad=True)
    with no_grad(): w.copy_(tensor([5.0, 6.0]))
    assert w.is_leaf and w.requires_grad and w.tolist() == [5.0, 6.0]


def test_a_product_saves_only_what_the_other_gradient_needs():
    "y * 2 needs y only for the gradient of the 2, which has none: an in-place change of y afterwards is fine (as in torch)."
    y = tensor([1.0, 2.0], requires_grad=True) * 1.0
    z = y * 2
    y.add_(1)
    z.sum().backward()                                   # raised 'modified by an in-place operation' before
    w = tensor([1.0, 2.0], requires_grad=True)
    y2 = w * 1.0
    p = y2 * w                                           # here y2 is needed for w's gradient, and is changed
    y2.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        p.sum().backward()
