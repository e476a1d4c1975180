"mytorch.compile and mytorch.lower: replays equal eager mode; guards, graph breaks, randomness and optimizers."
import warnings

import numpy as np
import pytest

import mytorch
import mytorch.nn as nn
import mytorch.nn.functional as F
from mytorch import tensor, float64
from mytorch.compiler import Unsupported

rng = np.random.default_rng(400)


def mlp(seed=0, act=nn.Tanh):
    mytorch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16, dtype=float64), act(), nn.Linear(16, 16, dtype=float64), nn.ReLU(),
                         nn.Linear(16, 4, dtype=float64))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        mytorch.manual_seed(1)
        self.body = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1, dtype=float64), nn.BatchNorm2d(3, dtype=float64),
                                  nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(48, 10, dtype=float64))
    def forward(self, x, y): return F.cross_entropy(self.body(x), y)


class LSTMStep(nn.Module):
    def __init__(self):
        super().__init__()
        mytorch.manual_seed(2)
        self.cell = nn.LSTMCell(6, 5, dtype=float64)
    def forward(self, x, h, c):
        h, c = self.cell(x, (h, c))
        return (h * h).sum() + c.mean()


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.x = nn.Parameter(tensor(np.linspace(-1, 1, 6), dtype=float64))
    def forward(self):
        y = self.x
        for _ in range(250): y = (y * 1.0001 + 0.001).tanh() - 0.0001 * y
        return y.sum()


class MLPLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(3)
    def forward(self, x, y): return F.cross_entropy(self.net(x), y)


def state(m):
    return [t.detach().numpy().copy() for t in list(m.parameters()) + list(m.buffers())]


@pytest.mark.parametrize("make, inputs", [
    (MLPLoss, (tensor(rng.standard_normal((16, 5))), tensor(rng.integers(0, 4, 16)))),
    (CNN, (tensor(rng.standard_normal((6, 1, 8, 8))), tensor(rng.integers(0, 10, 6)))),
    (LSTMStep, tuple(tensor(rng.standard_normal(s)) for s in ((3, 6), (3, 5), (3, 5)))),
    (Chain, ()),
], ids=['mlp', 'cnn', 'lstm_step', 'chain'])
@pytest.mark.parametrize("opt", ['SGD', 'Adam'])
def test_replay_equals_eager_through_training(make, inputs, opt):
    a, b = make(), make()
    cb = mytorch.compile(b)
    oa = getattr(mytorch.optim, opt)(a.parameters(), lr=0.05)
    ob = getattr(mytorch.optim, opt)(b.parameters(), lr=0.05)
    for step in range(4):
        oa.zero_grad(); ob.zero_grad()
        la, lb = a(*inputs), cb(*inputs)
        la.backward(); lb.backward()
        assert abs(la.item() - lb.item()) <= 1e-12
        for p, q in zip(a.parameters(), b.parameters()):
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-12)
        oa.step(); ob.step()
        for s, t in zip(state(a), state(b)): np.testing.assert_allclose(t, s, rtol=0, atol=1e-12)
    assert cb._compiled.counts == {'traces': 1, 'replays': 3, 'eager': 0}


def test_lower_listing_stats_and_bitwise_replay():
    w = tensor(rng.standard_normal((3, 2)), requires_grad=True)
    x = tensor(rng.standard_normal((4, 3)))
    fn = lambda x: ((x @ w).tanh() * 3.0).mean()
    tape = mytorch.lower(fn, x)
    text = str(tape)
    assert 'np.matmul' in text and '-- backward --' in text
    st = tape.stats()
    assert set(st) >= {'instructions', 'values', 'buffers', 'peak_bytes', 'eager_peak_bytes'}
    assert st['buffers'] < st['values'] and st['peak_bytes'] <= st['eager_peak_bytes']
    fn(x).backward(); want = w.grad.numpy().copy(); w.grad = None
    tape(x).backward()
    assert (w.grad.numpy() == want).all()   # the same NumPy calls in the same order


def test_guards_retrace_on_shape_dtype_requires_grad_mode():
    m = mlp()
    f = mytorch.compile(lambda x: m(x).sum())
    x = tensor(rng.standard_normal((8, 5)))
    f(x); f(x)
    assert f.counts == {'traces': 1, 'replays': 1, 'eager': 0}
    f(tensor(rng.standard_normal((3, 5))))                       # another shape
    f(tensor(rng.standard_normal((8, 5)), requires_grad=True))   # requires_grad
    with mytorch.no_grad(): out = f(x)                            # grad mode
    assert out.grad_fn is None and f.counts['traces'] == 4
    m.eval(); f(x); m.train()                                     # a module's mode
    assert f.counts['traces'] == 5
    m[0].weight = nn.Parameter(m[0].weight.detach().clone())      # a parameter replaced
    f(x)
    assert f.counts['traces'] == 6
    m.to(mytorch.float32)                                         # the captured parameters' dtype
    f(x.float())
    assert f.counts['traces'] == 7


def test_optimizer_updates_are_seen_and_nothing_is_baked():
    m = mlp()
    f = mytorch.compile(lambda x: m(x).pow(2).mean())
    x = tensor(rng.standard_normal((8, 5)))
    f(x)
    for p in m.parameters(): p.data.mul_(0.5) if False else p.detach().mul_(0.5)
    assert abs(f(x).item() - m(x).pow(2).mean().item()) <= 1e-12


def test_grad_accumulates_like_eager_and_two_forwards_before_backward():
    m1, m2 = mlp(), mlp()
    f = mytorch.compile(lambda x: m2(x).sum())
    x1, x2 = tensor(rng.standard_normal((4, 5))), tensor(rng.standard_normal((4, 5)))
    f(x1)   # the trace
    a1, a2 = m1(x1).sum(), m1(x2).sum()
    b1, b2 = f(x1), f(x2)      # two replays in flight: two buffer sets
    a2.backward(); a1.backward(); b2.backward(); b1.backward()
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-12)


def test_dropout_draws_fresh_masks_like_eager():
    mytorch.manual_seed(5)
    net = nn.Sequential(nn.Linear(5, 32, dtype=float64), nn.Dropout(0.5), nn.Linear(32, 2, dtype=float64))
    c = mytorch.compile(net)
    x = tensor(rng.standard_normal((4, 5)))
    outs = []
    for seed in (11, 12, 13):
        mytorch.manual_seed(seed); got = c(x).detach().numpy()
        mytorch.manual_seed(seed); want = net(x).detach().numpy()
        assert (got == want).all()
        outs.append(got)
    assert not (outs[1] == outs[2]).all()
    assert c._compiled.counts['replays'] == 2


def test_random_creation_inside_is_drawn_again():
    f = mytorch.compile(lambda x: x + mytorch.randn(3, dtype=float64))
    x = tensor(np.zeros(3))
    a, b, c = f(x), f(x), f(x)
    assert not (b.numpy() == c.numpy()).all() and f.counts['replays'] == 2


def test_comparisons_and_where_replay():
    f = mytorch.compile(lambda x: F.leaky_relu(x, 0.1).sum())
    for _ in range(3):
        x = tensor(rng.standard_normal(7), requires_grad=True)
        f(x).backward()
        y = x.detach().clone().requires_grad_(); F.leaky_relu(y, 0.1).sum().backward()
        assert (x.grad.numpy() == y.grad.numpy()).all()
    assert f.counts['replays'] == 2


@pytest.mark.parametrize("body, what", [
    (lambda x: x * 2 if x.sum() > 0 else x, 'bool()'),
    (lambda x: x * x.max().item(), '.item()'),
    (lambda x: x * len(x.tolist()), '.tolist()'),
    (lambda x: tensor(x.detach().numpy() * 2), '.numpy()'),
    (lambda x: x[x > 0].sum(), 'index'),
])
def test_graph_breaks_fall_back_to_eager_with_one_warning(body, what):
    f = mytorch.compile(body)
    x = tensor(rng.standard_normal(5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        outs = [f(x), f(x)]
    msgs = [str(w.message) for w in caught if 'mytorch.compile' in str(w.message)]
    assert len(msgs) == 1 and 'runs eagerly' in msgs[0]
    assert caught[0].filename.endswith('test_compile.py')   # the warning points at the user's line
    assert f.counts == {'traces': 1, 'replays': 0, 'eager': 1}
    np.testing.assert_array_equal(outs[1].numpy(), body(x).numpy())
    with pytest.raises(Unsupported, match='fullgraph=True'):
        mytorch.compile(body, fullgraph=True)(x)


def test_in_place_write_breaks():
    buf = tensor(np.zeros(3))
    def f(x):
        buf.add_(1.0)
        return x + buf
    c = mytorch.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for _ in range(3): c(tensor(np.ones(3)))
    assert buf.numpy().tolist() == [3.0, 3.0, 3.0] and c.counts['eager'] == 2


def test_refusals():
    f = mytorch.compile(lambda x: (x * x).sum())
    x = tensor(np.arange(3.0), requires_grad=True)
    f(x); y = f(x)
    with pytest.raises(RuntimeError, match='cannot be differentiated again'):
        mytorch.autograd.grad(y, x, create_graph=True)
    y = f(x); y.backward()
    with pytest.raises(RuntimeError, match='second time'):
        y.backward()
    with pytest.raises(RuntimeError, match='callable or an nn.Module'):
        mytorch.compile(3)


def test_decorator_kwargs_tuples_and_module_wrapper():
    @mytorch.compile
    def two(x, *, scale):
        return x * scale, (x * scale).sum()
    x = tensor(np.arange(4.0), requires_grad=True)
    for _ in range(3):
        a, b = two(x, scale=tensor(2.0, dtype=float64))
    assert isinstance(two(x, scale=tensor(3.0, dtype=float64)), tuple)
    assert two(x, scale=tensor(3.0, dtype=float64))[1].item() == 18.0   # a tensor keyword is an input, not baked
    m = mlp()
    cm = mytorch.compile(m)
    assert list(cm.state_dict())[0].startswith('_orig_mod.') and cm._orig_mod is m
    assert all(p is q for p, q in zip(cm.parameters(), m.parameters()))
    assert mytorch.compile(disable=True)(m) is m
