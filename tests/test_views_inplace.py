"""Writing through views, as PyTorch does it: a grid of view kinds x in-place ops, compared with PyTorch.

For each pair, the same program runs on both libraries in float64: y = 1.5 x (a tensor in the graph), v = a view of y,
an in-place op on v (with a second leaf w where the op takes a tensor), then a loss that uses both y and v after the
write. The values of y and v, the loss, the first gradients with respect to x and w, and the second derivatives
(the gradient of <r, first gradient> again with respect to x and w) must agree with PyTorch's. Then the refusals
PyTorch makes (a view of a leaf, one of several views, a view made under no_grad, a broadcast view) and forward mode.
The mechanism is derived in chapter 10, "Writing through a view".
"""
import numpy as np
import pytest
import torch

import mytorch as T

TOL = 1e-12   # float64; the programs are a few ops deep on numbers of order 1

# The view, made from a (3, 4) tensor the same way in both libraries.
VIEWS = {
    'slice':       lambda y: y[0:2],
    'row':         lambda y: y[1],
    'column':      lambda y: y[:, 1],
    'step':        lambda y: y[:, ::2],
    'element':     lambda y: y[2, 3],
    'ellipsis':    lambda y: y[..., 1:3],
    'view':        lambda y: y.view(12),
    'reshape':     lambda y: y.reshape(2, 6),
    't':           lambda y: y.t(),
    'transpose':   lambda y: y.transpose(0, 1),
    'permute':     lambda y: y.permute(1, 0),
    'unsqueeze':   lambda y: y.unsqueeze(0),
    'narrow':      lambda y: y.narrow(1, 1, 2),
    'flatten':     lambda y: y.flatten(),
    'view_of_view': lambda y: y[1:].t()[0:3],
    'squeeze':     lambda y: y[0:1].squeeze(0),
}


def _imul(v, w):
    v *= w
    return v


def _iadd(v, w):
    v += 1.5
    return v


def _setitem_all(v, w):
    v[...] = w
    return v


def _setitem_first(v, w):
    if v.ndim: v[0] = w[0] * 2.0
    else: v[...] = w * 2.0
    return v


# The in-place op on the view v, with w a leaf of v's shape (unused by some ops).
OPS = {
    'mul_number': lambda v, w: v.mul_(2.0),
    'add_tensor': lambda v, w: v.add_(w),
    'mul_tensor': lambda v, w: v.mul_(w),
    'sub_alpha':  lambda v, w: v.sub_(w, alpha=2.0),
    'div_tensor': lambda v, w: v.div_(w * w + 1.0),
    'imul':       _imul,
    'iadd':       _iadd,
    'copy_':      lambda v, w: v.copy_(w * 3.0),
    'zero_':      lambda v, w: v.zero_(),
    'fill_':      lambda v, w: v.fill_(0.25),
    'setitem':    _setitem_all,
    'setitem_0':  _setitem_first,
    'exp_':       lambda v, w: v.exp_(),
    'clamp_':     lambda v, w: v.clamp_(-0.5, 0.5),
    'pow_':       lambda v, w: v.pow_(2),
}


def _program(lib, view, op, x0, w0):
    "Run the grid's program with library `lib`; return every number it makes, as NumPy arrays."
    x = lib.tensor(x0, dtype=lib.float64, requires_grad=True)
    y = x * 1.5
    v = VIEWS[view](y)
    w = lib.tensor(w0.reshape(tuple(v.shape)), dtype=lib.float64, requires_grad=True)
    OPS[op](v, w)
    loss = (y * y * 0.5).sum() + (v * v * v).sum()
    gx, gw = lib.autograd.grad(loss, (x, w), create_graph=True, allow_unused=True)
    gx = gx if gx is not None else x * 0.0
    gw = gw if gw is not None else w * 0.0
    r = lib.tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4), dtype=lib.float64)
    second = (gx * r).sum() + (gw * gw).sum()
    hx, hw = lib.autograd.grad(second, (x, w), allow_unused=True)
    as_np = lambda t: None if t is None else t.detach().numpy().copy()
    return dict(y=as_np(y), v=as_np(v), loss=as_np(loss), gx=as_np(gx), gw=as_np(gw), hx=as_np(hx), hw=as_np(hw),
                version=y._version, requires_grad=(y.requires_grad, v.requires_grad))


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, (3, 4)), rng.uniform(-1.0, 1.0, 12)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_inplace_on_a_view_matches_pytorch(view, op):
    x0, w0 = _inputs(hash((view, op)) % 2**32)
    n = np.prod(VIEWS[view](torch.zeros(3, 4)).shape, dtype=int)
    w0 = w0[:n]
    mine, theirs = _program(T, view, op, x0, w0), _program(torch, view, op, x0, w0)
    assert mine['requires_grad'] == theirs['requires_grad']
    assert mine['version'] == theirs['version'], (mine['version'], theirs['version'])
    for k in ('y', 'v', 'loss', 'gx', 'gw', 'hx', 'hw'):
        a, b = mine[k], theirs[k]
        if b is None or a is None:
            assert (a is None or not np.any(a)) and (b is None or not np.any(b)), (k, a, b)
            continue
        np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL, err_msg=f"{k} after {op} on {view}")


def test_the_examples_that_were_silently_wrong():
    "Each of these once gave x.grad = 1 everywhere; PyTorch's numbers in the comments."
    def run(lib, write):
        x = lib.tensor([[1., 2., 3.], [4., 5., 6.]], dtype=lib.float64, requires_grad=True)
        y = x * 1
        write(y)
        y.sum().backward()
        return x.grad.numpy().tolist()
    cases = [lambda y: y[0:1].mul_(2),               # [[2, 2, 2], [1, 1, 1]]
             lambda y: y.view(6).mul_(3),            # 3 everywhere
             lambda y: y.t().mul_(0),                # 0 everywhere
             lambda y: y.view(6).__setitem__(0, 5.),  # 0 at [0, 0]
             lambda y: y[:, :2].__imul__(2)]         # 2 in the first two columns
    for write in cases:
        assert run(T, write) == run(torch, write)


def test_a_view_taken_before_a_write_follows_the_base():
    for lib in (T, torch):
        x = lib.tensor([1., 2., 3., 4.], dtype=lib.float64, requires_grad=True)
        y = x * 1
        v = y[0:2]
        early = v.sum()            # recorded before the write: it describes the old numbers
        y.mul_(3)
        late = v.sum()             # the view is remade from the new base
        g_early, = lib.autograd.grad(early, x, retain_graph=True)
        g_late, = lib.autograd.grad(late, x)
        assert g_early.tolist() == [1., 1., 0., 0.] and g_late.tolist() == [3., 3., 0., 0.], lib.__name__
        assert v.tolist() == [3., 6.]


def test_a_base_that_needs_no_grad_takes_the_gradient_of_what_is_written():
    for lib in (T, torch):
        w = lib.tensor([2., 3.], dtype=lib.float64, requires_grad=True)
        y = lib.zeros(4, dtype=lib.float64)
        y[1:3].copy_(w * w)
        assert y.requires_grad and not y.is_leaf
        (y * lib.tensor([1., 10., 100., 1000.], dtype=lib.float64)).sum().backward()
        assert w.grad.tolist() == [40., 600.]


def _raises(f):
    try: f()
    except RuntimeError as e: return str(e)
    return None


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_a_view_of_a_leaf_that_requires_grad_is_refused_while_recording(view):
    msgs = {}
    for lib in (T, torch):
        x = lib.tensor(np.ones((3, 4)), dtype=lib.float64, requires_grad=True)
        msgs[lib] = _raises(lambda: VIEWS[view](x).mul_(2.0))
        with lib.no_grad(): VIEWS[view](x).mul_(2.0)        # an optimizer's kind of write is fine
        assert x.detach().numpy().max() == 2.0 and x.is_leaf and x.requires_grad
    assert msgs[torch] is not None and msgs[T] is not None
    assert "a view of a leaf Variable that requires grad is being used in an in-place operation" in msgs[T]


@pytest.mark.parametrize("split", [lambda y: y.split(2)[0], lambda y: y.unbind()[1], lambda y: y.chunk(2)[1]])
def test_one_of_several_views_cannot_be_written_while_recording(split):
    for lib in (T, torch):
        x = lib.tensor([1., 2., 3., 4.], dtype=lib.float64, requires_grad=True)
        msg = _raises(lambda: split(x * 1).mul_(2))
        assert msg is not None and "returns multiple views" in msg, lib.__name__
        y = lib.zeros(4, dtype=lib.float64)
        split(y).add_(1)                     # nothing requires grad: a plain write, seen in y
        assert y.sum().item() > 0


def test_a_view_made_under_no_grad_cannot_be_written_with_recording_on():
    for lib in (T, torch):
        x = lib.tensor([1., 2., 3.], dtype=lib.float64, requires_grad=True)
        y = x * 1
        with lib.no_grad(): v = y[0:2]
        msg = _raises(lambda: v.mul_(2))
        assert msg is not None and "created in no_grad mode" in msg, lib.__name__


def test_a_broadcast_view_cannot_be_written():
    for lib in (T, torch):
        x = lib.tensor([1., 2., 3.], dtype=lib.float64, requires_grad=True)
        msg = _raises(lambda: (x * 1).expand(2, 3).mul_(2))
        assert msg is not None and "single memory location" in msg, lib.__name__


def test_a_saved_view_that_is_overwritten_is_caught():
    for lib in (T, torch):
        x = lib.tensor([1., 2., 3.], dtype=lib.float64, requires_grad=True)
        y = x * 1
        v = y[0:2]
        z = v * v                   # saves v
        y[0] = 10.0
        msg = _raises(lambda: z.sum().backward())
        assert msg is not None and "modified by an inplace operation".replace('inplace', 'in-place') in msg.replace(
            'inplace', 'in-place'), lib.__name__


@pytest.mark.parametrize("op", ['mul_tensor', 'copy_', 'setitem', 'fill_', 'exp_'])
def test_forward_mode_through_a_write_to_a_view(op):
    "The tangent of the base after a write through its view, against torch.autograd.forward_ad."
    import torch.autograd.forward_ad as tfwd
    import mytorch.autograd.forward_ad as mfwd
    x0, w0 = _inputs(7)
    tx0, tw0 = _inputs(8)
    out = {}
    for lib, fwd in ((T, mfwd), (torch, tfwd)):
        with fwd.dual_level():
            x = fwd.make_dual(lib.tensor(x0, dtype=lib.float64), lib.tensor(tx0, dtype=lib.float64))
            w = fwd.make_dual(lib.tensor(w0[:4], dtype=lib.float64), lib.tensor(tw0[:4], dtype=lib.float64))
            y = x * 1.5
            OPS[op](y[1], w)
            p, t = fwd.unpack_dual(y)
            out[lib] = (p.numpy().copy(), t.numpy().copy())
    np.testing.assert_allclose(out[T][0], out[torch][0], rtol=TOL, atol=TOL)
    np.testing.assert_allclose(out[T][1], out[torch][1], rtol=TOL, atol=TOL)
