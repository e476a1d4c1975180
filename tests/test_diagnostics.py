"""TrainingMonitor: each finding kind named on a network that has the fault, none on healthy ones, and a monitor
that leaves the model exactly as it found it. The example's four-setup comparison is checked at the end."""
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import mytorch
import mytorch.nn as nn
import mytorch.optim as optim
from mytorch.gradient_check import assert_close
from mytorch.diagnostics import (TrainingMonitor, Thresholds, Finding, RULES, plot_activations, plot_gradients,
                                 plot_update_ratios)

ROOT = Path(__file__).resolve().parents[1]

# A small synthetic task: 512 points in 32 dimensions, 5 classes given by a random linear map.
_gen = mytorch.Generator().manual_seed(0)
X = mytorch.randn(512, 32, generator=_gen)
Y = (X @ mytorch.randn(32, 5, generator=_gen)).argmax(1)


def mlp(widths, act=nn.Tanh, std=None, gain=1.0, seed=0):
    """Linear layers of `widths` with `act` between them. Weights: N(0, std) when std is given, else
    gain * sqrt(2 / fan_in) for ReLU and gain * (5/3) / sqrt(fan_in) otherwise; biases 0."""
    gen = mytorch.Generator().manual_seed(seed)
    layers = []
    for i, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:])):
        lin = nn.Linear(n_in, n_out, generator=gen)
        s = std if std is not None else gain * (math.sqrt(2 / n_in) if act is nn.ReLU else (5 / 3) / math.sqrt(n_in))
        nn.init.normal_(lin.weight, 0.0, s, generator=gen)
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if i < len(widths) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


def linear_in_float64(layer, x):
    """(outputs, scale) of the float32 Linear `layer` on `x`, computed in float64 from the same float32 numbers:
    x @ W.T + b, and its size without cancellation |x| @ |W|.T + |b|, the scale of assert_close. The float32 outputs
    differ from these by rounding alone, whatever order the BLAS kernel adds in. Statistics of the outputs inherit
    the bound: a mean is off by at most the mean error, a std by at most the rms error (|std a - std b| <= rms(a - b)),
    so they take the mean and the largest of the scales."""
    x, w, b = (t.detach().numpy().astype(np.float64) for t in (x, layer.weight, layer.bias))
    return x @ w.T + b, np.abs(x) @ np.abs(w).T + np.abs(b)


def fit(model, steps=20, lr=0.05, batch=64, monitor=None, seed=1):
    "Plain SGD on random batches; records into `monitor` between backward and step. Returns the losses."
    opt = optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    gen = mytorch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        idx = mytorch.randint(0, len(Y), (batch,), generator=gen)
        loss = loss_fn(model(X[idx]), Y[idx])
        opt.zero_grad()
        loss.backward()
        if monitor is not None:
            monitor.record(learning_rate=lr)
        opt.step()
        losses.append(loss.item())
    return losses


def diagnose(model, steps=20, lr=0.05, **thresholds):
    with TrainingMonitor(model, **thresholds) as monitor:
        fit(model, steps, lr, monitor=monitor)
    return monitor


def kinds(monitor):
    return {f.kind for f in monitor.findings()}


def places(monitor, kind):
    return [f.place for f in monitor.findings() if f.kind == kind]


# ---------------------------------------------------------------- healthy networks: nothing to report

@pytest.mark.parametrize("act", [nn.Tanh, nn.ReLU])
def test_healthy_network_has_no_findings(act):
    monitor = diagnose(mlp([32, 64, 64, 64, 5], act=act), steps=30)
    assert monitor.findings() == []
    assert monitor.report() == "diagnosis: 0 finding(s)"


# ---------------------------------------------------------------- one test per finding kind

def test_saturated_activations_are_named_per_layer():
    monitor = diagnose(mlp([32, 64, 64, 64, 5], std=1.0))
    assert places(monitor, "saturated-activations") == ["1 (Tanh)", "3 (Tanh)", "5 (Tanh)"]
    f = monitor.findings()[0]
    assert f.value > 0.5 and f.threshold == 0.25
    assert "flagged above 25%" in f.message and "|a| > 0.97" in f.message


def test_vanishing_gradients_are_named_and_explain_the_slow_weights():
    model = mlp([32, 64, 64, 64, 64, 5], std=None, gain=0.06)
    monitor = diagnose(model)
    named = places(monitor, "vanishing-gradients")
    assert named and named[0] == "0 (Linear)", monitor.report()
    f = monitor.findings()[0]
    assert f.value < 1e-3 and f.threshold == 1e-3 and "flagged below 1e-03" in f.message
    # The first weights barely move, yet the learning-rate rule defers to the cause already named.
    assert monitor.history[-1].params["0.weight"].update < -4.5
    assert kinds(monitor) == {"vanishing-gradients"}


def test_exploding_gradients_are_named():
    monitor = diagnose(mlp([32] + [64] * 7 + [5], act=nn.ReLU, gain=4.0), steps=3, lr=1e-5)
    named = places(monitor, "exploding-gradients")
    assert named and named[0] == "0 (Linear)", monitor.report()
    f = [f for f in monitor.findings() if f.kind == "exploding-gradients"][0]
    assert f.value > 1e3 and "flagged above 1e+03" in f.message


def test_dead_relu_units_are_named():
    model = mlp([32, 64, 64, 5], act=nn.ReLU)
    with mytorch.no_grad():
        model[2].bias[:32] = -50.0   # half of the second hidden layer can never fire
    monitor = diagnose(model)
    dead = [f for f in monitor.findings() if f.kind == "dead-units"]
    assert [f.place for f in dead] == ["3 (ReLU)"], monitor.report()
    assert dead[0].value == pytest.approx(0.5) and "32 of its 64 units" in dead[0].message


def test_nonfinite_values_name_the_first_layer_where_they_appear():
    model = mlp([32, 64, 64, 64, 5])
    with mytorch.no_grad():
        model[4].weight[3, 3] = math.inf
    with np.errstate(all="ignore"):
        monitor = diagnose(model, steps=3)
    found = [f for f in monitor.findings() if f.kind == "nonfinite-values"]
    assert [f.place for f in found] == ["4 (Linear)"]
    assert "first layer of the forward pass" in found[0].message and found[0].threshold == 0


def test_nonfinite_gradient_is_traced_back_from_the_loss():
    class SqrtAtZero(nn.Module):   # forward finite, backward infinite: d sqrt(x)/dx at x = 0
        def forward(self, x): return (x * 0.0).sqrt()
    model = nn.Sequential(nn.Linear(32, 8), SqrtAtZero(), nn.Linear(8, 5))
    policy = mytorch.get_math_policy()
    mytorch.set_math_policy("nan")   # by default the engine raises at that derivative instead
    try:
        with np.errstate(all="ignore"):
            monitor = diagnose(model, steps=1)
    finally:
        mytorch.set_math_policy(policy)
    found = [f for f in monitor.findings() if f.kind == "nonfinite-values"]
    assert [f.place for f in found] == ["0 (Linear)"], monitor.report()
    assert "gradient" in found[0].message


def test_a_gradient_that_never_arrives_is_named():
    class Detached(nn.Module):
        def __init__(self):
            super().__init__()
            self.features, self.head, self.unused = nn.Linear(32, 16), nn.Linear(16, 5), nn.Linear(4, 4)
        def forward(self, x): return self.head(self.features(x).tanh().detach())
    monitor = diagnose(Detached())
    assert places(monitor, "missing-gradient") == ["features.weight", "features.bias", "unused.weight", "unused.bias"]
    assert "no gradient (.grad is None)" in monitor.findings()[0].message


def test_learning_rate_too_high_is_named():
    monitor = diagnose(mlp([32, 64, 64, 5], act=nn.ReLU), lr=3.0)
    assert places(monitor, "learning-rate-too-high"), monitor.report()
    f = [f for f in monitor.findings() if f.kind == "learning-rate-too-high"][0]
    assert f.value > -1.5 and f.threshold == -1.5 and "flagged above -1.5" in f.message
    assert "lower the learning rate" in f.remedy


def test_learning_rate_too_low_is_named():
    monitor = diagnose(mlp([32, 64, 64, 5]), lr=1e-5)
    assert places(monitor, "learning-rate-too-low") == ["0.weight", "2.weight", "4.weight"]
    f = monitor.findings()[0]
    assert f.value < -4.5 and "flagged below -4.5" in f.message and "raise the learning rate" in f.remedy


# ---------------------------------------------------------------- the report and the structured form

def test_report_has_a_count_line_and_one_block_per_finding():
    monitor = diagnose(mlp([32, 64, 64, 64, 5], std=1.0))
    found = monitor.findings()
    blocks = monitor.report().split("\n\n")
    assert blocks[0] == f"diagnosis: {len(found)} finding(s)"
    assert len(blocks) == len(found) + 1
    for block, f in zip(blocks[1:], found):
        assert block.startswith(f"  [{f.kind}] {f.place}") and "    try: " in block
    assert all(isinstance(f, Finding) and {"kind", "place", "value", "threshold"} <= set(vars(f)) for f in found)


def test_thresholds_are_changeable_and_rejudge_the_recorded_steps():
    monitor = diagnose(mlp([32, 64, 64, 5]), steps=30)
    assert monitor.findings() == []
    monitor.thresholds = replace(monitor.thresholds, saturated_fraction=0.0)
    assert places(monitor, "saturated-activations") == ["1 (Tanh)", "3 (Tanh)"]
    assert "flagged above 0%" in monitor.findings()[0].message
    strict = diagnose(mlp([32, 64, 64, 5]), steps=30, update_ratio_high=-4.0)
    assert "learning-rate-too-high" in kinds(strict)
    assert "flagged above -4" in strict.findings()[0].message
    with pytest.raises(TypeError, match="saturated_fraction"):
        TrainingMonitor(mlp([4, 4]), saturation_fraction=0.5)
    # The defaults the chapter documents and explains.
    assert Thresholds() == Thresholds(saturation_slope=0.06, saturated_fraction=0.25, dead_fraction=0.10,
                                      vanishing_ratio=1e-3, exploding_ratio=1e3, update_ratio_high=-1.5,
                                      update_ratio_low=-4.5, update_ratio_min_ndim=2, window=10)
    assert [r.__name__ for r in RULES] == ["check_nonfinite", "check_missing_gradient", "check_saturation",
                                           "check_dead_units", "check_gradient_flow", "check_learning_rate"]


# ---------------------------------------------------------------- the monitor leaves no trace on the model

def _snapshot(model):
    return ([(name, sorted(vars(m)), len(m._forward_hooks), len(m._forward_pre_hooks)) for name, m in model.named_modules()],
            sorted(model.state_dict()), [id(p) for p in model.parameters()])


def test_monitor_adds_no_state_and_removes_its_hooks():
    model = mlp([32, 64, 64, 5])
    before = _snapshot(model)
    with TrainingMonitor(model) as monitor:
        assert sum(len(m._forward_hooks) for m in model.modules()) == 5   # the leaves: 3 Linear, 2 Tanh
        fit(model, 3, monitor=monitor)
    assert _snapshot(model) == before
    assert monitor._pending == {} and len(monitor.history) == 3


def test_hooks_are_removed_when_training_raises():
    model = mlp([32, 64, 5])
    before = _snapshot(model)
    monitor = TrainingMonitor(model)
    with pytest.raises(ZeroDivisionError):
        with monitor:
            model(X[:8])
            1 / 0
    assert _snapshot(model) == before
    assert monitor._pending == {}   # the activations of the interrupted step are let go


def test_monitored_training_is_bit_identical_to_unmonitored():
    a, b = mlp([32, 64, 64, 5]), mlp([32, 64, 64, 5])
    la = fit(a, 10)
    with TrainingMonitor(b) as monitor:
        lb = fit(b, 10, monitor=monitor)
    assert la == lb
    assert all(np.array_equal(p.detach().numpy(), q.detach().numpy()) for p, q in zip(a.parameters(), b.parameters()))


def test_record_refuses_the_easy_mistakes():
    model = mlp([32, 16, 5])
    monitor = TrainingMonitor(model)
    with pytest.raises(RuntimeError, match="context manager"):
        monitor.record()
    with monitor:
        with pytest.raises(RuntimeError, match="no forward pass"):
            monitor.record()
        model(X[:8])
        with pytest.raises(RuntimeError, match="no gradient anywhere"):
            monitor.record()
        for bad in (0, -1.0, math.nan, True, "0.1"):
            with pytest.raises(ValueError, match="positive finite number"):
                monitor.record(learning_rate=bad)
        with pytest.raises(RuntimeError, match="already watching"):
            monitor.__enter__()
    with pytest.raises(TypeError, match="Module"):
        TrainingMonitor(lambda x: x)


def test_no_grad_forwards_are_not_recorded_and_repeated_calls_are_joined():
    lin = nn.Linear(32, 5, generator=mytorch.Generator().manual_seed(0))
    with TrainingMonitor(lin) as monitor:
        with mytorch.no_grad():
            lin(X[:100])                       # a validation pass: ignored
        loss = lin(X[:8]).sum() + lin(X[8:20]).sum()   # the layer called twice in one step
        loss.backward()
        monitor.record(learning_rate=0.1)
    s = monitor.history[0].layers[""]
    assert s.size == 20 * 5
    assert s.grad_rms == pytest.approx(1.0)   # d(sum)/d(output) = 1 everywhere
    out, scale = linear_in_float64(lin, X[:20])
    # The outputs' mean is near zero: its relative error has no bound, and a relative tolerance passes or fails with the
    # CPU's BLAS kernel. The absolute one below is derived from the size of the outputs' terms (chapter 02).
    assert_close(s.mean, out.mean(), dtype=np.float32, n=32 + 1, scale=scale.mean(), what="mean")
    assert_close(s.std, out.std(), dtype=np.float32, n=32 + 1, scale=scale.max(), what="std")


def test_outputs_are_recorded_before_a_later_inplace_op_changes_them():
    gen = mytorch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 16, generator=gen), nn.ReLU(inplace=True), nn.Linear(16, 5, generator=gen))
    with mytorch.no_grad():
        pre = model[0](X[:64]).numpy().copy()   # what the first layer outputs, before the ReLU clips it
    with TrainingMonitor(model) as monitor:
        model(X[:64]).sum().backward()
        monitor.record()
    s = monitor.history[0].layers["0"]
    out, scale = linear_in_float64(model[0], X[:64])
    assert pre.min() < 0   # there are negatives for the ReLU to clip; the monitor must have seen them
    assert_close(s.mean, out.mean(), dtype=np.float32, n=32 + 1, scale=scale.mean(), what="mean")
    assert_close(s.std, out.std(), dtype=np.float32, n=32 + 1, scale=scale.max(), what="std")
    assert monitor.history[0].params["0.weight"].update is None   # no learning rate given: no update ratio

def test_update_ratio_is_log10_of_lr_times_grad_over_data():
    model = mlp([32, 16, 5])
    with TrainingMonitor(model) as monitor:
        fit(model, 1, lr=0.05, monitor=monitor)
    w0 = mlp([32, 16, 5])[0].weight.detach().numpy().astype(np.float64)
    p = monitor.history[0].params["0.weight"]
    g = model[0].weight.grad.numpy().astype(np.float64)
    rms = lambda a: np.sqrt(np.mean(a * a))
    assert p.data_rms != pytest.approx(rms(model[0].weight.detach().numpy()))   # recorded before the step ...
    assert p.data_rms == pytest.approx(rms(w0))                        # ... so against the old weights
    assert p.update == pytest.approx(math.log10(0.05 * rms(g) / rms(w0)))


def test_every_samples_steps_and_keeps_nothing_in_between():
    model = mlp([32, 64, 5])
    with TrainingMonitor(model, every=4) as monitor:
        opt = optim.SGD(model.parameters(), lr=0.05)
        for step in range(10):
            loss = nn.CrossEntropyLoss()(model(X[:32]), Y[:32])
            opt.zero_grad()
            loss.backward()
            if step % 4:
                assert monitor._pending == {}   # the hooks kept nothing on a step that is not sampled
            monitor.record(learning_rate=0.05)
            opt.step()
    assert [r.step for r in monitor.history] == [0, 4, 8] and monitor.steps == 10
    with pytest.raises(ValueError, match="positive int"):
        TrainingMonitor(model, every=0)


# ---------------------------------------------------------------- plots

def test_plots_draw_the_four_views():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    monitor = diagnose(mlp([32, 64, 64, 5]), steps=5)
    ax = plot_activations(monitor)
    assert len(ax.lines) == 2 and "saturated" in ax.get_legend().get_texts()[0].get_text()
    assert len(plot_gradients(monitor).lines) == 2
    ax = plot_update_ratios(monitor)
    assert any(list(line.get_ydata()) == [-3, -3] for line in ax.lines)   # the reference line
    assert len([l for l in ax.lines if len(l.get_xdata()) == 5]) == 3     # one curve per weight
    plt.close("all")
    with pytest.raises(ValueError, match="not recorded a step"):
        plot_activations(TrainingMonitor(mlp([4, 4])))


# ---------------------------------------------------------------- the example's comparison

def _example(*args):
    # 64x100 matmuls gain nothing from BLAS threads, and on a busy shared machine OpenBLAS's spinning threads
    # make them ~30x slower: one thread, unless the caller chose otherwise.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "diagnose_training.py"), *args],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_example_compare_diagnoses_each_initialization():
    pytest.importorskip("sklearn")
    out = _example("--compare", "--steps", "60")
    rows = {line.split()[0]: line for line in out.splitlines()[2:] if line.strip()}
    assert list(rows) == ["saturated", "vanishing", "batchnorm", "healthy"], out
    diagnosis = {name: line.split("  ")[-1].strip() for name, line in rows.items()}
    assert "saturated-activations" in diagnosis["saturated"], out
    assert "vanishing-gradients" in diagnosis["vanishing"], out
    assert diagnosis["batchnorm"] == "none", out
    assert diagnosis["healthy"] == "none", out


def test_example_setup_runs_one_and_prints_its_report():
    pytest.importorskip("sklearn")
    out = _example("--setup", "vanishing", "--steps", "20")
    assert out.count("vanishing") >= 2 and "healthy" not in out
    assert "diagnosis: 3 finding(s)" in out and "[vanishing-gradients] layers.0 (Linear)" in out
