"""check_invariants: passes what holds, catches what does not, and reports the input that broke it."""
import numpy as np
import pytest

import mytorch
import mytorch.nn.functional as F
from mytorch import units
from mytorch.invariants import (Bounds, Conservation, Equivariance, Invariance, InvariantError, check_invariants)
from mytorch.units import DimensionError

WEIGHT = mytorch.randn(1, 1, 3, generator=mytorch.Generator().manual_seed(1))


def permute_rows(x, g): return x[mytorch.randperm(x.shape[0], generator=g)]
def cloud(g): return mytorch.randn(12, 3, generator=g)
def total_probability(x, y): return mytorch.ones(y.shape[:-1]), y.sum(-1)
def conv_zero(x): return F.conv1d(x, WEIGHT, padding=1)
def conv_circular(x): return F.conv1d(mytorch.cat([x[..., -1:], x, x[..., :1]], -1), WEIGHT)
def shift(x, g): return x.roll(int(mytorch.randint(1, x.shape[-1], (), generator=g)), -1)


def spike(g):
    x = mytorch.zeros(1, 1, 24)
    x[0, 0, int(mytorch.randint(0, 24, (), generator=g))] = 1.0
    return x


def test_set_function_passes_and_ordered_function_fails():
    assert check_invariants(lambda x: x.tanh().sum(0), Invariance(permute_rows), cloud, trials=64).ok
    r = check_invariants(lambda x: x.reshape(36)[:3] * 1.0, Invariance(permute_rows, 'order'), cloud, trials=64)
    assert not r.ok and r['order'].worst > 1e-3 and r['order'].input.shape == (12, 3)
    with pytest.raises(InvariantError, match="order"): r.raise_if_failed()


def test_softmax_bounds_and_conservation_and_the_naive_one_caught():
    invs = [Bounds(0, 1), Conservation(total_probability)]
    logits = lambda g: 30 * mytorch.randn(4, 10, generator=g)
    assert check_invariants(lambda x: F.softmax(x, -1), invs, logits, trials=64).ok
    def naive(x): e = x.exp(); return e / e.sum(-1, keepdim=True)
    r = check_invariants(naive, invs, logits, trials=64)
    assert not r.ok and r[0].worst == np.inf
    row = r[0].where[0]
    assert r[0].input[row].max().item() > 88   # float32 exp overflows above about 88.7
    with pytest.raises(InvariantError, match="naive broke 2 of its 2"): r.raise_if_failed()


def test_convolution_equivariant_with_circular_padding_only_and_the_edge_is_reported():
    eq = Equivariance(shift, shift)
    signal = lambda g: mytorch.randn(1, 1, 24, generator=g)
    assert check_invariants(conv_circular, eq, signal, trials=64).ok
    assert not check_invariants(conv_zero, eq, signal, trials=64).ok
    by_one = Equivariance(lambda x: x.roll(1, -1), lambda y: y.roll(1, -1))
    r = check_invariants(conv_zero, by_one, spike, trials=128)
    assert not r.ok and int(r[0].input[0, 0].numpy().argmax()) in (0, 23)
    assert check_invariants(conv_circular, by_one, spike, trials=128).ok


@pytest.mark.parametrize("dtype", [mytorch.float32, mytorch.float64])
def test_default_tolerance_scales_with_dtype(dtype):
    r = check_invariants(lambda x: x.sum(0), Invariance(permute_rows), lambda g: mytorch.randn(64, 2, generator=g, dtype=dtype), trials=16)
    assert r.ok and r[0].tol == pytest.approx(16 * np.sqrt(128) * np.finfo(dtype).eps)


def test_tensor_of_examples_and_reproducibility():
    examples = mytorch.randn(7, 12, 3, generator=mytorch.Generator().manual_seed(0))
    r = check_invariants(lambda x: x.sum(0), Invariance(permute_rows), examples, trials=100)
    assert r[0].trials == 7
    a = check_invariants(lambda x: x.reshape(36)[:3] * 1.0, Invariance(permute_rows), cloud, trials=16, seed=5)
    b = check_invariants(lambda x: x.reshape(36)[:3] * 1.0, Invariance(permute_rows), cloud, trials=16, seed=5)
    assert a[0].worst == b[0].worst and a[0].trial == b[0].trial


def test_quantities_conservation_and_unit_checks():
    k, dt = mytorch.tensor(0.7) / units.hour, mytorch.tensor(0.1) * units.hour
    step = lambda a: a + k * dt * a[0] * mytorch.tensor([-1., 1.])
    amounts = lambda g: mytorch.rand(2, generator=g) * 500 * units.mg
    assert check_invariants(step, [Conservation(lambda a: a.sum()), Bounds(0 * units.mg)], amounts, trials=32).ok
    leaky = lambda a: a * 0.99
    assert not check_invariants(leaky, Conservation(lambda a: a.sum()), amounts, trials=8).ok
    with pytest.raises(DimensionError): check_invariants(step, Bounds(0, 1.0), amounts, trials=2)
    hours = lambda g: mytorch.rand(2, generator=g) * units.hour
    with pytest.raises(DimensionError): check_invariants(lambda t: t.magnitude * units.mg, Conservation(lambda a: a.sum()), hours, trials=1)


def test_refusals():
    with pytest.raises(TypeError, match="Invariance"): check_invariants(F.relu, lambda x: x, cloud)
    with pytest.raises(TypeError, match="sampler"): check_invariants(F.relu, Bounds(0), [1, 2])
    with pytest.raises(ValueError, match="low or a high"): Bounds()
    with pytest.raises(ValueError, match="shapes"): check_invariants(F.relu, Invariance(lambda x: x[:3]), cloud, trials=1)
