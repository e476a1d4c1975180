"""The array rules (`backward_numpy`) of chapters 15 (indexing) and 16 (linalg) give the very bits of their Tensor rules.

For every shape case of the matrix product, every kind of indexing key and every other op of the two chapters, the
gradients of a backward pass that records nothing (array rules) are compared with those of `create_graph=True` (the
Tensor rules), in float64 and float32: same dtype, same shape, equal bit for bit (nan where nan). And a backward pass
through these ops on arrays runs no Tensor op at all.
"""
import numpy as np
import pytest

import mytorch
from mytorch import tensor
from mytorch.autograd import grad
from mytorch.linalg import (MatMul, Addmm, Einsum, Cross, Inverse, Det, Softmax, LogSoftmax, _MatrixTranspose, _Reshape,
                            _DiagonalEmbed, matmul, mm, bmm, dot, outer, addmm, einsum, cross, inverse, det, softmax,
                            log_softmax, cdist)
from mytorch.indexing import Index, IndexAccumulate, IndexPut
import mytorch.indexing, mytorch.shape   # noqa: F401  (the Tensor methods of both chapters)

RNG = np.random.default_rng(15_16)
def normal(*shape): return RNG.standard_normal(shape)
def well(*shape):
    "Square matrices plus 3I: well conditioned."
    return normal(*shape) + 3 * np.eye(shape[-1])

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3, 4)), ((2, 3), (3,)), ((3,), (3, 4)), ((3,), (2, 3, 2)), ((2, 2, 3), (3,)),
                 ((2, 2, 3), (3, 2)), ((2, 3), (2, 3, 2)), ((2, 1, 2, 3), (3, 3, 2)), ((1, 2, 3), (4, 3, 2)),
                 ((4, 2, 3), (1, 3, 2)), ((5, 1, 3), (3, 1)), ((0, 3), (3, 2)), ((2, 0), (0, 3)), ((32, 32), (32, 32))]
_m = np.array
CASES = {f'matmul {sa} @ {sb}': (lambda a, b: a @ b, [normal(*sa), normal(*sb)]) for sa, sb in MATMUL_SHAPES}
CASES.update({
    'matmul, only a needs a gradient': (lambda a, b=normal(3, 2): a @ tensor(b.astype(a.dtype)), [normal(4, 2, 3)]),
    'matmul, only b needs a gradient': (lambda b, a=normal(4, 2, 3): tensor(a.astype(b.dtype)) @ b, [normal(3,)]),
    'mm': (mm, [normal(2, 3), normal(3, 2)]),
    'bmm': (bmm, [normal(2, 2, 3), normal(2, 3, 2)]),
    'dot': (dot, [normal(4), normal(4)]),
    'outer': (outer, [normal(3), normal(2)]),
    'addmm': (addmm, [normal(2, 3), normal(2, 4), normal(4, 3)]),
    'addmm broadcast input, beta and alpha': (lambda m, a, b: addmm(m, a, b, beta=0.5, alpha=-2.0),
                                              [normal(3), normal(2, 4), normal(4, 3)]),
    'addmm beta=0 alpha=0': (lambda m, a, b: addmm(m, a, b, beta=0, alpha=0), [normal(2, 3), normal(2, 4), normal(4, 3)]),
    'addmm NumPy factors': (lambda m, a, b: addmm(m, a, b, beta=np.float32(0.3), alpha=np.float64(1.7)),
                            [normal(1, 3), normal(2, 4), normal(4, 3)]),
    'einsum ij,jk->ik': (lambda a, b: einsum('ij,jk->ik', a, b), [normal(2, 3), normal(3, 2)]),
    'einsum bhqd,bhkd->bhqk': (lambda a, b: einsum('bhqd,bhkd->bhqk', a, b), [normal(2, 2, 3, 4), normal(2, 2, 3, 4)]),
    'einsum ij->ji (a view)': (lambda a: einsum('ij->ji', a), [normal(2, 3)]),
    'einsum ii->i (a diagonal)': (lambda a: einsum('ii->i', a), [normal(3, 3)]),
    'einsum ii-> (the trace)': (lambda a: einsum('ii->', a), [normal(3, 3)]),
    'einsum ij,j->i (a lonely letter)': (lambda a, b: einsum('ij,k->i', a, b), [normal(2, 3), normal(4)]),
    'einsum ...ij,...jk (broadcast)': (lambda a, b: einsum('...ij,...jk', a, b), [normal(2, 1, 2, 3), normal(4, 3, 2)]),
    'einsum three operands': (lambda a, b, c: einsum('ij,jk,kl->il', a, b, c), [normal(2, 3), normal(3, 4), normal(4, 2)]),
    'einsum iij,jk->ik': (lambda a, b: einsum('iij,jk->ik', a, b), [normal(2, 2, 3), normal(3, 2)]),
    'cross': (lambda a, b: cross(a, b, dim=1), [normal(4, 3), normal(4, 3)]),
    'cross broadcast': (lambda a, b: cross(a, b, dim=0), [normal(3, 4), normal(3, 1)]),
    'inverse': (inverse, [well(3, 3)]),
    'inverse batched': (inverse, [well(2, 3, 3)]),
    'det': (det, [well(3, 3)]),
    'det batched': (det, [well(2, 3, 3)]),
    'softmax dim=-1': (lambda x: softmax(x, -1), [normal(2, 5)]),
    'softmax dim=0, 3-D': (lambda x: softmax(x, 0), [normal(3, 2, 2)]),
    'softmax 0-d': (lambda x: softmax(x, 0), [np.array(0.7)]),
    'softmax of large scores': (lambda x: softmax(x, 1), [normal(2, 3) + 1000.0]),
    'log_softmax dim=-1': (lambda x: log_softmax(x, -1), [normal(2, 5)]),
    'log_softmax dim=1, 3-D': (lambda x: log_softmax(x, 1), [normal(2, 3, 2)]),
    'log_softmax 0-d': (lambda x: log_softmax(x, 0), [np.array(-0.3)]),
    'cdist': (lambda a, b: cdist(a, b), [normal(3, 2), normal(4, 2)]),
    'mT': (lambda x: _MatrixTranspose.apply(x), [normal(2, 3, 4)]),
    'reshape (a copy)': (lambda x: _Reshape.apply(x.permute(1, 0), (6,)), [normal(2, 3)]),
    'diagonal embed': (lambda x: _DiagonalEmbed.apply(x, 'iij', 'ij', (3, 3, 2)), [normal(3, 2)]),
    # indexing: every kind of key
    'x[1]': (lambda x: x[1], [normal(3, 4)]),
    'x[0, 1] (0-d view)': (lambda x: x[0, 1], [normal(3, 4)]),
    'x[:, 1:3, None]': (lambda x: x[:, 1:3, None], [normal(3, 4)]),
    'x[..., ::2]': (lambda x: x[..., ::2], [normal(2, 3, 4)]),
    'x[ids] (repeats)': (lambda x: x[tensor([1, 3, 1, 1, -1])], [normal(4, 3)]),
    'x[:, ids] (repeats)': (lambda x: x[:, tensor([2, 0, 2])], [normal(3, 4)]),
    'x[rows, cols]': (lambda x: x[[0, 1, 1], [2, 0, 0]], [normal(3, 4)]),
    'x[1:, ids] (two stages)': (lambda x: x[1:, tensor([0, 2, 0])], [normal(3, 4)]),
    'x[0, :, [0, 1]] (two stages)': (lambda x: x[0, :, [0, 1]], [normal(3, 4, 5)]),
    'x[mask]': (lambda x: x[tensor(_m([True, False, True]))], [normal(3, 2)]),
    'x[:, mask]': (lambda x: x[:, tensor(_m([[True, False], [False, True], [True, True]]))], [normal(2, 3, 2)]),
    'x[True]': (lambda x: x[True], [normal(2, 3)]),
    'x[range(3), y]': (lambda x: x[range(3), [0, 2, 1]], [normal(3, 3)]),
    'x[[]] (empty)': (lambda x: x[[]], [normal(3, 2)]),
    'gather': (lambda x: x.gather(1, tensor([[0, 0], [2, 1], [1, 1]])), [normal(3, 3)]),
    'scatter_add': (lambda x, s: x.scatter_add(0, tensor([[0, 1, 0], [0, 0, 2]]), s), [normal(3, 3), normal(2, 3)]),
    'index_select': (lambda x: x.index_select(1, tensor([2, 0, 2])), [normal(2, 3)]),
    'index_add': (lambda x, s: x.index_add(0, tensor([1, 1, 0]), s, alpha=0.5), [normal(2, 3), normal(3, 3)]),
    'masked_fill, value a number': (lambda x: x.masked_fill(tensor(_m([True, False, True])), -1.0), [normal(2, 3)]),
    'masked_fill, value a tensor, mask broadcast': (lambda x, v: x.masked_fill(tensor(_m([[True], [False]])), v),
                                                    [normal(3), np.array(0.5)]),
    'scatter, repeated positions': (lambda x, s: x.scatter(0, tensor([1, 1, 3]), s), [normal(4), normal(4)]),
    'scatter, a number': (lambda x: x.scatter(1, tensor([[2], [0]]), 1.0), [normal(2, 3)]),
    'index_fill, value a tensor': (lambda x, v: x.index_fill(1, tensor([0, 2, 0]), v), [normal(3, 4), np.array(-1.0)]),
    'index_copy': (lambda x, s: x.index_copy(0, tensor([2, 0]), s), [normal(3, 2), normal(2, 2)]),
    'masked_select': (lambda x: x.masked_select(tensor(_m([[True, False], [True, True]]))), [normal(2)]),
    'take': (lambda x: x.take(tensor([[0, 11], [5, -1], [5, 5]])), [normal(3, 4)]),
    'take_along_dim': (lambda x: x.take_along_dim(tensor([[0], [2]]), 1), [normal(2, 3)]),
    'index accumulate': (lambda g: IndexAccumulate.apply(g, (4, 3), (np.array([0, 2, 0]),), 2), [normal(3, 3)]),
})


def _put(key):
    "x, v -> (a copy of x with x[key] = v), written in place, as a reader writes it."
    def f(x, v):
        r = x * 1.0
        r[key] = v
        return r
    return f

CASES.update({
    'x[1:, 0] = v': (_put((slice(1, None), 0)), [normal(3, 4), normal(2)]),
    'x[ids] = v (no repeats)': (_put(np.array([2, 0])), [normal(3, 4), normal(2, 4)]),
    'x[mask] = v (a number tensor)': (_put(np.array([True, False, True])), [normal(3, 2), np.array(2.0)]),
    'x[0] = v with leading ones': (_put(0), [normal(3, 4), normal(1, 1, 4)]),
    'x[0, 1] = v (0-d)': (_put((0, 1)), [normal(2, 3), np.array(3.0)]),
})


def _grads(call, arrays, dtype, create_graph):
    "The gradients of call(*leaves) for a seeded random upstream gradient."
    leaves = [tensor(np.asarray(a, dtype=dtype), requires_grad=True) for a in arrays]
    out = call(*leaves)
    up = tensor(np.random.default_rng(7).standard_normal(out.shape).astype(dtype))
    got = grad(out, leaves, up, allow_unused=True, create_graph=create_graph)
    return [None if g is None else g.detach().numpy() for g in got]


# log_softmax's Tensor rule multiplies by softmax(y), its array rule by exp(y): the same numbers but for a rounding
ROUNDED = {'log_softmax dim=-1', 'log_softmax dim=1, 3-D', 'log_softmax 0-d'}


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('name', [n for n in CASES if n not in ROUNDED])
def test_array_rules_give_the_tensor_rules_bits(name, dtype):
    call, arrays = CASES[name]
    plain, graph = _grads(call, arrays, dtype, False), _grads(call, arrays, dtype, True)
    for k, (p, g) in enumerate(zip(plain, graph)):
        assert (p is None) == (g is None), (name, k)
        if p is None: continue
        assert p.dtype == g.dtype == dtype and p.shape == g.shape, (name, k, p.dtype, g.dtype, p.shape, g.shape)
        assert np.array_equal(p, g, equal_nan=True), (name, k, np.abs(p - g).max())


OURS = [MatMul, Addmm, Einsum, Cross, Inverse, Det, Softmax, LogSoftmax, _MatrixTranspose, _Reshape, _DiagonalEmbed,
        Index, IndexAccumulate, IndexPut]


@pytest.mark.parametrize('name', list(CASES))
def test_the_tensor_rules_do_not_run_in_a_backward_on_arrays(name, monkeypatch):
    "A backward pass that records nothing runs the array rule of every Function of the two chapters, never `backward`."
    call, arrays = CASES[name]
    leaves = [tensor(np.asarray(a), requires_grad=True) for a in arrays]
    out = call(*leaves)
    def refuse(ctx, *grads): raise AssertionError(f"{ctx.name()} ran its Tensor rule")
    for fn in OURS: monkeypatch.setattr(fn, 'backward', staticmethod(refuse))
    grad(out, leaves, tensor(np.ones(out.shape)), allow_unused=True)


def test_det_at_a_singular_matrix_on_arrays():
    "A singular matrix has no inverse; the array rule gives the cofactor matrix from an SVD, as the Tensor rule did."
    A = tensor(np.array([[1.0, 2.0], [2.0, 4.0]]), requires_grad=True)
    det(A).backward()
    np.testing.assert_allclose(A.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=16 * np.finfo(np.float64).eps * 4)
    B = tensor(np.array([[1.0, 2.0], [2.0, 4.0]]), requires_grad=True)
    node = det(B).grad_fn
    with mytorch.no_grad():   # a caller that runs the Tensor rule with nothing recording gets the same numbers
        via_tensor = Det.backward(node, tensor(np.array(1.0)))
    np.testing.assert_array_equal(via_tensor.numpy(), A.grad.numpy())


def test_log_softmax_rules_agree_within_rounding():
    for name in ROUNDED:
        call, arrays = CASES[name]
        for dtype in (np.float64, np.float32):
            plain, graph = _grads(call, arrays, dtype, False), _grads(call, arrays, dtype, True)
            eps = np.finfo(dtype).eps
            for p, g in zip(plain, graph):
                assert p.dtype == g.dtype == dtype
                assert (np.abs(p - g) <= 4 * eps * (1 + np.abs(g))).all(), (name, dtype, np.abs(p - g).max())
