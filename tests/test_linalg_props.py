"""Property tests for matmul and einsum (chapter 16) against PyTorch, in float64.

Random shape pairs cover every case of matmul's rules (vector-vector, matrix-vector,
vector-matrix, a vector against a stack, matrix-matrix, and stacks whose batch dims broadcast,
trailing-aligned, including size-1 and missing dims and empty dims), and random sizes for einsum
equations of the standard kinds (products, batched products, sums over one operand, transposes,
traces and diagonals, '...' with broadcasting, implicit output, three operands). Values and
gradients for a random upstream gradient must equal PyTorch's to 1e-10.
"""
import numpy as np
import torch
from hypothesis import given, settings, strategies as st

import mytorch.engine, mytorch.linalg
from mytorch.engine import tensor, grad
from mytorch.linalg import einsum

PROPS = settings(max_examples=50, deadline=None)
seeds = st.integers(0, 2**32 - 1)
TOL = 1e-10


def check(f, ft, arrays, seed):
    "Run f on mytorch tensors and ft on torch tensors; value and every gradient must agree to TOL."
    xs = [tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, tout = f(*xs), ft(*ts)
    assert out.shape == tuple(tout.shape)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=0, atol=TOL)
    G = np.random.default_rng(seed).standard_normal(out.shape)
    gm = grad(out, xs, tensor(G), allow_unused=True)
    gt = torch.autograd.grad(tout, ts, torch.tensor(G), allow_unused=True)
    for x, a, b in zip(xs, gm, gt):
        a = np.zeros(x.shape) if a is None else a.numpy()
        b = np.zeros(x.shape) if b is None else b.numpy()
        assert a.shape == b.shape == x.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL)


def arrays(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


size = st.integers(0, 3)          # 0 exercises empty products and empty sums
batch_size = st.integers(1, 3)


@st.composite
def batch_pair(draw):
    "Two batch shapes that broadcast: suffixes of one full batch shape, with some entries set to 1."
    full = draw(st.lists(batch_size, min_size=0, max_size=3))
    def one():
        rank = draw(st.integers(0, len(full)))
        part = full[len(full) - rank:]
        return tuple(1 if draw(st.booleans()) else n for n in part)
    return one(), one()


@st.composite
def matmul_shapes(draw):
    "Shapes (a, b) for a @ b, drawn from every case of PyTorch's rules."
    n, k, m = draw(size), draw(size), draw(size)
    kind = draw(st.sampled_from(['1x1', '2x1', '1x2', '1xN', 'Nx1', '2x2', 'batched']))
    ba, bb = draw(batch_pair())
    if kind == '1x1': return (k,), (k,)
    if kind == '2x1': return (n, k), (k,)
    if kind == '1x2': return (k,), (k, m)
    if kind == '1xN': return (k,), bb + (k, m)
    if kind == 'Nx1': return ba + (n, k), (k,)
    if kind == '2x2': return (n, k), (k, m)
    return ba + (n, k), bb + (k, m)


@PROPS
@given(matmul_shapes(), seeds)
def test_matmul_matches_torch(shapes, seed):
    check(lambda a, b: a @ b, lambda a, b: a @ b, arrays(shapes, seed), seed)


# (equation, subscripts whose letters get random sizes); '...' gets a random broadcast batch
EQUATIONS = ['ij,jk->ik', 'bij,bjk->bik', 'i,i->', 'i,j->ij', 'ij->ji', 'ij->', 'ij->j', 'ii->i', 'ii->',
             'iij->ij', 'ij,jk,kl->il', 'bij,jk->bik', 'ik,kj', 'ij,ij->ij', 'bhqd,bhkd->bhqk', 'ii,i->i',
             '...ij,...jk->...ik', '...ij->...ji', 'i...->...']


@st.composite
def einsum_case(draw):
    "An equation from EQUATIONS and operand shapes for it (letters sized 1-3, '...' a broadcast batch)."
    eq = draw(st.sampled_from(EQUATIONS))
    lhs = eq.split('->')[0].split(',')
    sizes = {c: draw(st.integers(1, 3)) for c in set(eq) if c.isalpha()}
    ba, bb = draw(batch_pair())
    ell = [ba, bb]
    shapes = []
    for i, s in enumerate(lhs):
        dims = []
        for part in s.split('...'):
            dims.append(tuple(sizes[c] for c in part))
        shapes.append(dims[0] + ell[i % 2] + dims[1] if '...' in s else dims[0])
    return eq, shapes


@PROPS
@given(einsum_case(), seeds)
def test_einsum_matches_torch(case, seed):
    eq, shapes = case
    check(lambda *xs: einsum(eq, *xs), lambda *xs: torch.einsum(eq, *xs), arrays(shapes, seed), seed)


def test_einsum_refuses_mismatched_sizes_like_torch():
    a, b = np.ones((2, 3)), np.ones((4, 2))
    try: torch.einsum('ij,jk->ik', torch.tensor(a), torch.tensor(b))
    except RuntimeError: pass
    else: raise AssertionError("torch accepted it")
    try: einsum('ij,jk->ik', tensor(a), tensor(b))
    except ValueError as e: assert "letter 'j' has size 4" in str(e)
    else: raise AssertionError("mytorch accepted it")
