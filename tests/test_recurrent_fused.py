"""The fused GRU and Elman RNN sequence ops (`GRUSequence`, `RNNSequence`, nbs/28_recurrent.ipynb) against
their cell loops, finite differences, forward mode and PyTorch, and the layers that use them.

Values and gradients are compared with the cell loop (`_gru_reference`, `_rnn_reference`) to 1e-12 in
float64, as the chapter does, and in float32 with a tolerance derived from the dtype's epsilon; PyTorch
parity is to 1e-10 in float64, after loading PyTorch's weights through `state_dict`.
"""
import warnings

import numpy as np
import pytest

import mytorch
from mytorch import float64
from mytorch.autograd import grad
from mytorch.gradient_check import assert_close, gradcheck, gradgradcheck, jvpcheck
from mytorch.nn.recurrent import (GRU, RNN, RNNBase, GRUSequence, RNNSequence, _gru_reference, _rnn_reference)

KINDS = ['tanh', 'relu', 'gru']


def normal(rng, *shape, scale=1.0, dtype=float64, requires_grad=True):
    return mytorch.tensor(rng.standard_normal(shape) * scale, dtype=dtype, requires_grad=requires_grad)


def op_and_reference(kind):
    "(fused(x, h0, *weights, reverse), loop(x, h0, *weights, reverse), number of gates)."
    if kind == 'gru':
        return (lambda *a, reverse: GRUSequence.apply(*a, reverse),
                lambda *a, reverse: _gru_reference(*a, reverse=reverse), 3)
    return (lambda *a, reverse: RNNSequence.apply(*a, kind, reverse),
            lambda *a, reverse: _rnn_reference(*a, nonlinearity=kind, reverse=reverse), 1)


def inputs(rng, kind, T=5, B=3, I=4, H=6, bias=True, dtype=float64):
    G = 3 if kind == 'gru' else 1
    ws = [normal(rng, G * H, I, scale=0.5, dtype=dtype), normal(rng, G * H, H, scale=0.5, dtype=dtype)]
    ws += [normal(rng, G * H, scale=0.3, dtype=dtype), normal(rng, G * H, scale=0.3, dtype=dtype)] if bias else [None, None]
    return [normal(rng, T, B, I, dtype=dtype), normal(rng, B, H, dtype=dtype)] + ws


def max_diff(a, b):
    return max(np.abs(p.detach().numpy().astype(np.float64) - q.detach().numpy().astype(np.float64)).max()
               for p, q in zip(a, b))


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('bias', [True, False])
@pytest.mark.parametrize('reverse', [False, True])
def test_fused_op_is_the_cell_loop_in_float64(kind, bias, reverse):
    rng = np.random.default_rng(0)
    fused, loop, _ = op_and_reference(kind)
    ins = inputs(rng, kind, bias=bias)
    a, b = fused(*ins, reverse=reverse), loop(*[t for t in ins if t is not None], reverse=reverse)
    assert len(a) == 2 and a[0].grad_fn is a[1].grad_fn and a[0].grad_fn.name().endswith('SequenceBackward')
    ups = [mytorch.tensor(rng.standard_normal(o.shape)) for o in a]
    tensors = [t for t in ins if t is not None]
    assert max_diff(a, b) < 1e-12
    assert max_diff(grad(list(a), tensors, ups), grad(list(b), tensors, ups)) < 1e-12


@pytest.mark.parametrize('kind', KINDS)
def test_fused_op_is_the_cell_loop_in_float32(kind):
    rng = np.random.default_rng(1)
    T, I, H = 5, 4, 6
    fused, loop, _ = op_and_reference(kind)
    for reverse in (False, True):
        ins = inputs(rng, kind, T=T, I=I, H=H, dtype=mytorch.float32)
        a, b = fused(*ins, reverse=reverse), loop(*ins, reverse=reverse)
        assert all(o.dtype == mytorch.float32 for o in a)
        ups = [mytorch.tensor(rng.standard_normal(o.shape), dtype=mytorch.float32) for o in a]
        for p, q in zip(list(a) + list(grad(list(a), ins, ups)), list(b) + list(grad(list(b), ins, ups))):
            # each of the T steps adds I + H + 3 terms into a number; the slopes are at most 1, so the steps'
            # errors add rather than grow
            assert_close(p, q, dtype=mytorch.float32, n=I + H + 3, scale=T * np.abs(q.detach().numpy()).max())


@pytest.mark.parametrize('kind', KINDS)
def test_gradcheck_gradgradcheck_and_jvp(kind):
    rng = np.random.default_rng(2)
    fused, _, _ = op_and_reference(kind)
    for reverse in (False, True):
        small = inputs(rng, kind, T=3, B=2, I=2, H=2)
        for k in (0, 1):
            f = lambda *a, k=k: fused(*a, reverse=reverse)[k]
            assert gradcheck(f, small)
            jvpcheck(f, small)
        tiny = inputs(rng, kind, T=2, B=1, I=1, H=1)
        assert gradgradcheck(lambda *a: mytorch.cat([o.reshape(-1) for o in fused(*a, reverse=reverse)]), tiny)


def test_no_bias_gradcheck():
    rng = np.random.default_rng(3)
    for kind in KINDS:
        fused, _, _ = op_and_reference(kind)
        x, h0, wi, wh, _, _ = inputs(rng, kind, T=3, B=2, I=2, H=2, bias=False)
        assert gradcheck(lambda x, h0, wi, wh: fused(x, h0, wi, wh, None, None, reverse=True)[0], (x, h0, wi, wh))


def test_input_gradient_is_skipped_when_not_needed():
    "The first layer's input rarely requires grad: backward then leaves out the product that computes it."
    rng = np.random.default_rng(4)
    for kind in KINDS:
        fused, loop, _ = op_and_reference(kind)
        ins = inputs(rng, kind)
        ins[0] = ins[0].detach()
        out, h = fused(*ins, reverse=False)
        (out.sum() + h.sum()).backward()
        assert ins[0].grad is None and all(t.grad is not None for t in ins[1:])


def test_output_written_in_place_does_not_change_the_gradient():
    "Backward keeps its own copy of the states: a caller writing into the output does not corrupt it."
    rng = np.random.default_rng(5)
    for kind in KINDS:
        fused, _, _ = op_and_reference(kind)
        ins = inputs(rng, kind)
        want = grad(fused(*ins, reverse=False)[0].sum(), ins[2])[0].numpy()
        out, _ = fused(*ins, reverse=False)
        out.detach()[...] = 1e6
        got = grad(out.sum(), ins[2])[0].numpy()
        assert np.abs(got - want).max() < 1e-12


def test_saturated_gates_agree_without_warnings():
    "Pre-activations past -709 overflow exp to inf in the GRU's sigmoid, which the loop allows for: 1 / (1 + inf) = 0."
    rng = np.random.default_rng(6)
    for kind in KINDS:
        fused, loop, _ = op_and_reference(kind)
        ins = inputs(rng, kind, T=4)
        ins[0] = (ins[0] * 1e3).detach()
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            a, b = fused(*ins, reverse=False), loop(*ins, reverse=False)
            ga, gb = grad(list(a), ins[2:], [mytorch.ones(*o.shape, dtype=float64) for o in a]), \
                grad(list(b), ins[2:], [mytorch.ones(*o.shape, dtype=float64) for o in b])
        for p, q in zip(list(a) + list(ga), list(b) + list(gb)):
            p, q = p.detach().numpy(), q.detach().numpy()
            assert np.isfinite(p).all()
            assert_close(p, q, dtype=float64, n=4 + 6 + 3, scale=4 * (1 + np.abs(q).max()))


def test_empty_batch_and_single_step():
    for layer in (GRU(4, 6, num_layers=2, bidirectional=True, dtype=float64),
                  RNN(4, 6, num_layers=2, nonlinearity='relu', bidirectional=True, dtype=float64)):
        out, h = layer(mytorch.zeros(5, 0, 4, dtype=float64, requires_grad=True))
        assert out.shape == (5, 0, 12) and h.shape == (4, 0, 6)
        (out.sum() + h.sum()).backward()
        assert layer.weight_hh_l1.grad.shape == layer.weight_hh_l1.shape and not layer.weight_hh_l1.grad.numpy().any()
        out, h = layer(mytorch.ones(1, 1, 4, dtype=float64))
        assert out.shape == (1, 1, 12) and h.shape == (4, 1, 6)


class LoopGRU(GRU):
    _direction = RNNBase._direction


class LoopRNN(RNN):
    _direction = RNNBase._direction


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('config', [dict(num_layers=2, bidirectional=True), dict(batch_first=True),
                                    dict(num_layers=3, dropout=0.4), dict(bias=False, bidirectional=True)])
@pytest.mark.parametrize('give_state', [True, False])
def test_layer_is_its_cell_loop(kind, config, give_state):
    "The layers through the fused ops against the same layers through RNNBase's cell loop, same dropout masks."
    rng = np.random.default_rng(7)
    L, D = config.get('num_layers', 1), 2 if config.get('bidirectional') else 1
    kw = dict(config, dtype=float64)
    if kind != 'gru': kw['nonlinearity'] = kind
    fused_cls, loop_cls = (GRU, LoopGRU) if kind == 'gru' else (RNN, LoopRNN)
    fused, loop = fused_cls(3, 5, **kw), loop_cls(3, 5, **kw)
    loop.load_state_dict(fused.state_dict())
    x = rng.standard_normal((2, 4, 3) if config.get('batch_first') else (4, 2, 3))
    h0 = rng.standard_normal((L * D, 2, 5))
    results = []
    for m in (fused, loop):
        m.generator = mytorch.Generator().manual_seed(11)   # the same dropout masks in both
        xt = mytorch.tensor(x, requires_grad=True)
        ht = mytorch.tensor(h0, requires_grad=True) if give_state else None
        out, h = m(xt, ht)
        leaves = [xt] + ([ht] if give_state else []) + list(m.parameters())
        g = grad([out, h], leaves, [mytorch.tensor(np.cos(np.arange(out.numel())).reshape(out.shape)),
                                    mytorch.tensor(np.sin(np.arange(h.numel())).reshape(h.shape))])
        results.append([out, h, *g])
    assert max_diff(*results) < 1e-12


def test_layers_use_the_fused_ops():
    x = mytorch.ones(3, 2, 4, dtype=float64)
    gru_out, _ = GRU(4, 5, dtype=float64)(x)
    rnn_out, _ = RNN(4, 5, nonlinearity='relu', dtype=float64)(x)
    assert gru_out.grad_fn.fn is GRUSequence and rnn_out.grad_fn.fn is RNNSequence


@pytest.mark.parametrize('kind', ['GRU', 'RNN tanh', 'RNN relu'])
@pytest.mark.parametrize('config', [dict(), dict(num_layers=2, bidirectional=True), dict(batch_first=True, bias=False),
                                    dict(num_layers=2, dropout=0.3, training=False), dict(give_state=False, num_layers=2),
                                    dict(unbatched=True, bidirectional=True)])
def test_parity_with_pytorch(kind, config):
    torch = pytest.importorskip('torch')
    config = dict(config)
    give_state, training, unbatched = (config.pop('give_state', True), config.pop('training', True),
                                       config.pop('unbatched', False))
    name, kw = kind.split()[0], dict(config)
    if kind.startswith('RNN'): kw['nonlinearity'] = kind.split()[1]
    theirs = getattr(torch.nn, name)(4, 3, dtype=torch.float64, **kw).train(training)
    ours = getattr(mytorch.nn, name)(4, 3, dtype=float64, **kw).train(training)
    ours.load_state_dict({k: mytorch.tensor(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(8)
    L, D = kw.get('num_layers', 1), 2 if kw.get('bidirectional') else 1
    X = rng.standard_normal((6, 4) if unbatched else (2, 6, 4) if kw.get('batch_first') else (6, 2, 4))
    S = rng.standard_normal((L * D, 3) if unbatched else (L * D, 2, 3))
    xm, xt = mytorch.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    sm, st = mytorch.tensor(S, requires_grad=True), torch.tensor(S, requires_grad=True)
    om, hm = ours(xm, sm if give_state else None)
    ot, ht = theirs(xt, st if give_state else None)
    assert max(np.abs(om.detach().numpy() - ot.detach().numpy()).max(),
               np.abs(hm.detach().numpy() - ht.detach().numpy()).max()) < 1e-10
    ups = [rng.standard_normal(tuple(t.shape)) for t in (ot, ht)]
    mytorch.autograd.backward([om, hm], [mytorch.tensor(u) for u in ups])
    torch.autograd.backward([ot, ht], [torch.tensor(u) for u in ups])
    pairs = [(xm, xt)] + ([(sm, st)] if give_state else []) + list(zip(ours.parameters(), theirs.parameters()))
    assert max(np.abs(a.grad.numpy() - b.grad.numpy()).max() for a, b in pairs) < 1e-10


def test_unknown_nonlinearity_is_refused():
    rng = np.random.default_rng(9)
    with pytest.raises(ValueError, match="Select from 'tanh' or 'relu'"):
        RNNSequence.apply(*inputs(rng, 'tanh'), 'sigmoid', False)


@pytest.mark.parametrize('kind', KINDS + ['lstm'])
def test_forward_mode_through_a_backward_that_records_nothing(kind):
    "Forward over reverse: a gradient taken without create_graph inside a dual level carries the tangent (as PyTorch's)."
    from mytorch.autograd.forward_ad import dual_level, make_dual, unpack_dual
    from mytorch.nn.recurrent import LSTMSequence
    rng = np.random.default_rng(8)
    if kind == 'lstm':
        G, op = 4, lambda *a: LSTMSequence.apply(*a, False)
        ins = [normal(rng, 3, 2, 2, scale=0.5, requires_grad=False), *(normal(rng, 2, 3, scale=0.5, requires_grad=False) for _ in range(2))]
    else:
        G, op = (3 if kind == 'gru' else 1), (lambda *a: op_and_reference(kind)[0](*a, reverse=True))
        ins = [normal(rng, 3, 2, 2, scale=0.5, requires_grad=False), normal(rng, 2, 3, scale=0.5, requires_grad=False)]
    ins += [normal(rng, G * 3, 2, scale=0.5, requires_grad=False), normal(rng, G * 3, 3, scale=0.5, requires_grad=False),
            normal(rng, G * 3, scale=0.3, requires_grad=False), normal(rng, G * 3, scale=0.3, requires_grad=False)]
    us = [normal(rng, *t.shape, requires_grad=False) for t in ins]
    k = len(ins) - 4   # w_ih
    def w_ih_grad(*a):
        a = [t if t.requires_grad else t.requires_grad_() for t in a]
        return grad(op(*a)[0].sum(), a[k])[0]   # create_graph=False: the array rule's pass, under forward mode
    with dual_level():
        tangent = unpack_dual(w_ih_grad(*[make_dual(t, u) for t, u in zip(ins, us)])).tangent
    assert tangent is not None
    e = 1e-6
    shifted = lambda s: w_ih_grad(*[(t + s * e * u).detach() for t, u in zip(ins, us)]).numpy()
    central = (shifted(1) - shifted(-1)) / (2 * e)
    np.testing.assert_allclose(tangent.numpy(), central, atol=1e-7 * (1 + np.abs(central).max()))
