"""mytorch.units against pint: every conversion between units of one dimension, refusals for every pair of different
dimensions, and gradients that carry units (values checked by central differences in float64)."""
import itertools
import math

import numpy as np
import pytest

import mytorch
from mytorch import units
from mytorch.units import DimensionError, Quantity

pint = pytest.importorskip("pint")
ureg = pint.UnitRegistry()

# each of mytorch's units, and a few compound ones, with the same unit spelled for pint
POOL = [
    (units.kg, "kilogram"), (units.g, "gram"), (units.mg, "milligram"),
    (units.m, "meter"), (units.cm, "centimeter"), (units.km, "kilometer"),
    (units.s, "second"), (units.minute, "minute"), (units.hour, "hour"),
    (units.mol, "mole"), (units.K, "kelvin"), (units.A, "ampere"), (units.L, "liter"),
    (units.m ** 3, "meter ** 3"), (units.cm ** 3, "centimeter ** 3"),
    (units.mg / units.L, "milligram / liter"), (units.g / units.L, "gram / liter"), (units.kg / units.m ** 3, "kilogram / meter ** 3"),
    (units.mol / units.L, "mole / liter"), (units.mol / units.m ** 3, "mole / meter ** 3"),
    (units.m / units.s, "meter / second"), (units.km / units.hour, "kilometer / hour"), (units.cm / units.minute, "centimeter / minute"),
    (units.mg / units.L / units.hour, "milligram / liter / hour"), (units.g / units.m ** 3 / units.s, "gram / meter ** 3 / second"),
    (units.hour ** -1, "1 / hour"), (units.s ** -1, "1 / second"), (units.minute ** -1, "1 / minute"),
    (units.kg * units.m / units.s ** 2, "kilogram * meter / second ** 2"), (units.g * units.cm / units.minute ** 2, "gram * centimeter / minute ** 2"),
    (units.A * units.s, "ampere * second"), (units.K / units.s, "kelvin / second"), (units.K / units.hour, "kelvin / hour"),
]
PAIRS = list(itertools.product(range(len(POOL)), repeat=2))


def dims(u):
    "A unit's dimensions as pint writes them: {'[mass]': 1, '[length]': -3}."
    return {f"[{n}]": e for n, e in zip(units._DIM_NAMES, u.dims) if e}


def test_pool_dimensions_match_pint():
    for u, p in POOL:
        assert dims(u) == dict(ureg.Quantity(1, p).dimensionality), (u, p)


@pytest.mark.parametrize("i,j", PAIRS)
def test_conversion_against_pint(i, j):
    (u, pu), (v, pv) = POOL[i], POOL[j]
    values = np.array([0.0, 1.0, -2.5, 1234.5678, 3e-7])
    same = ureg.Quantity(1, pu).dimensionality == ureg.Quantity(1, pv).dimensionality
    q = mytorch.tensor(values, dtype=mytorch.float64) * u
    if same:
        ours = q.to(v).numpy(v)
        theirs = ureg.Quantity(values, pu).to(pv).magnitude
        np.testing.assert_allclose(ours, theirs, rtol=8 * np.finfo(np.float64).eps, atol=0)
        assert (u == v) == math.isclose(ureg.Quantity(1, pu).to(pv).magnitude, 1.0, rel_tol=1e-12)
    else:
        with pytest.raises(pint.DimensionalityError): ureg.Quantity(values, pu).to(pv)
        with pytest.raises(DimensionError): q.to(v)
        with pytest.raises(DimensionError): q + mytorch.tensor(values, dtype=mytorch.float64) * v


@pytest.mark.parametrize("i,j", PAIRS[::7])
def test_products_and_quotients_against_pint(i, j):
    (u, pu), (v, pv) = POOL[i], POOL[j]
    for ours, theirs in ((u * v, ureg.Quantity(1, pu) * ureg.Quantity(1, pv)), (u / v, ureg.Quantity(1, pu) / ureg.Quantity(1, pv))):
        base = theirs.to_base_units()
        assert dims(ours) == dict(base.dimensionality)
        assert math.isclose(ours.scale, base.magnitude, rel_tol=1e-12)


def test_addition_refused_with_provenance_and_fix():
    a = mytorch.tensor([1.0]) * units.kg
    b = mytorch.tensor([500.0]) * units.g
    with pytest.raises(DimensionError) as e: a + b
    msg = str(e.value)
    assert isinstance(e.value, ValueError)
    assert "kg" in msg and " g " in msg and "test_units.py" in msg and ".to(units.kg)" in msg
    np.testing.assert_allclose((a + b.to(units.kg)).numpy(units.kg), [1.5])


def test_exp_of_hours_refused_both_forms():
    t = mytorch.tensor([1.0, 2.0]) * units.hour
    for call in (lambda: mytorch.exp(t), lambda: t.exp(), lambda: mytorch.nn.functional.softmax(t, 0), lambda: t.log()):
        with pytest.raises(DimensionError, match="dimensionless"): call()
    k = mytorch.tensor(0.5) / units.hour
    out = (-(k * t)).exp()
    assert type(out) is mytorch.Tensor
    np.testing.assert_allclose(out.numpy(), np.exp([-0.5, -1.0]), rtol=1e-6)


def test_free_functions_that_do_not_carry_units_refuse():
    q = mytorch.tensor([[1.0, -2.0], [3.0, 4.0]]) * units.m
    for call in (lambda: mytorch.sum(q), lambda: mytorch.cat([q, q]), lambda: mytorch.nn.functional.relu(q),
                 lambda: mytorch.where(q > 0, q, q), lambda: mytorch.nn.functional.linear(q, mytorch.ones(2, 2)),
                 lambda: mytorch.tensor(q), lambda: mytorch.allclose(q, q)):
        with pytest.raises(DimensionError, match="does not carry units"): call()


def test_gradient_units_and_values():
    rng = np.random.default_rng(0)
    x = units.quantity(rng.standard_normal(5), units.m, dtype=mytorch.float64, requires_grad=True)
    t = units.quantity(rng.uniform(1, 2, 5), units.s, dtype=mytorch.float64, requires_grad=True)
    loss = ((x / t) ** 2).sum().to(units.km ** 2 / units.hour ** 2)
    loss.backward()
    assert x.grad.unit == loss.unit / x.unit and t.grad.unit == loss.unit / t.unit
    xv, tv, f = x.detach().numpy(units.m), t.detach().numpy(units.s), (3600 / 1000) ** 2
    np.testing.assert_allclose(x.grad.numpy(x.grad.unit), f * 2 * xv / tv ** 2, rtol=1e-12)
    np.testing.assert_allclose(t.grad.numpy(t.grad.unit), f * -2 * xv ** 2 / tv ** 3, rtol=1e-12)


def test_accumulating_gradients_of_losses_in_different_units_refused():
    x = units.quantity([1.0, 2.0], units.m, requires_grad=True)
    (x * x).sum().backward()
    with pytest.raises(DimensionError, match="different units"): x.sum().backward()


from hypothesis import given, settings, strategies as st

NAMED = [(units.kg, "kilogram"), (units.g, "gram"), (units.mg, "milligram"), (units.m, "meter"), (units.cm, "centimeter"),
         (units.km, "kilometer"), (units.s, "second"), (units.minute, "minute"), (units.hour, "hour"), (units.mol, "mole"),
         (units.K, "kelvin"), (units.A, "ampere"), (units.L, "liter")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(NAMED) - 1), st.sampled_from([-3, -2, -1, -0.5, 0.5, 1, 2, 3])), min_size=1, max_size=5))
def test_random_power_products_match_pint(factors):
    "A random product of powers of the named units has pint's scale (in SI base units) and dimensions."
    ours, theirs = units.dimensionless, ureg.Quantity(1.0, "dimensionless")
    for i, p in factors:
        u, name = NAMED[i]
        ours, theirs = ours * u ** p, theirs * ureg.Quantity(1.0, name) ** p
    base = theirs.to_base_units()
    assert dims(ours) == {k: v for k, v in dict(base.dimensionality).items() if v}
    assert math.isclose(ours.scale, base.magnitude, rel_tol=1e-12)
    # and a quantity in that unit converts to the SI-base unit of the same dimensions as pint does
    si = units.dimensionless
    for b, e in zip((units.kg, units.m, units.s, units.mol, units.K, units.A), ours.dims): si = si * b ** e
    if not ours.dimensionless:
        q = mytorch.tensor([2.5], dtype=mytorch.float64) * ours
        np.testing.assert_allclose(q.to(si).numpy(si), 2.5 * base.magnitude, rtol=1e-12)


def test_importing_units_leaves_tensor_unchanged():
    import subprocess, sys
    probe = ("import mytorch\nfrom mytorch.engine import Tensor\nbefore = dict(vars(Tensor))\n"
             "import mytorch.units\nprint(dict(vars(Tensor)) == before)")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "True"


def test_parameter_with_unit_attached_in_forward_gets_its_gradient():
    vmax = mytorch.nn.Parameter(mytorch.tensor([5.0], dtype=mytorch.float64))
    c = mytorch.tensor([2.0, 8.0], dtype=mytorch.float64) * units.mg / units.L
    km = mytorch.tensor([4.0], dtype=mytorch.float64) * units.mg / units.L
    rate = vmax * (units.mg / units.L / units.hour) * c / (km + c)
    assert rate.unit == units.mg / units.L / units.hour
    rate.sum().backward()                      # a loss in mg/(L·h): the parameter (a plain number) gets a grad in it
    assert type(vmax.grad) is mytorch.Tensor
    np.testing.assert_allclose(vmax.grad.numpy(), [2 / 6 + 8 / 12], rtol=1e-12)


def test_dimensionless_results_are_plain_and_scaled():
    r = (mytorch.tensor([3.0]) * units.m) / (mytorch.tensor([50.0]) * units.cm)
    assert type(r) is mytorch.Tensor
    np.testing.assert_allclose(r.numpy(), [6.0])
