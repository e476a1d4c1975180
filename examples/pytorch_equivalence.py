"""The same network in MyTorch and in PyTorch, step for step, in float64.

A 6 -> 16 -> 12 -> 4 tanh MLP is built in both frameworks with identical weights; the script
compares the forward logits, the cross-entropy loss, every parameter's gradient, the parameters
after one SGD-with-momentum step, after one Adam step, and after ten Adam steps. Each check
prints its max |diff| and PASS when it is at most 1e-10:

    python examples/pytorch_equivalence.py

Needs PyTorch (`make test` installs the pinned CPU build).
"""
import sys

import numpy as np
import torch

import mytorch
import mytorch.nn as nn
import mytorch.optim as optim

TOL = 1e-10
SIZES = (6, 16, 12, 4)


def build(lib, torch_model=None):
    "The MLP in `lib` (mytorch or torch); mytorch's copies its weights from `torch_model`."
    layers = []
    for i, (a, b) in enumerate(zip(SIZES, SIZES[1:])):
        layers.append(lib.nn.Linear(a, b, dtype=lib.float64))
        if i < len(SIZES) - 2: layers.append(lib.nn.Tanh())
    model = lib.nn.Sequential(*layers)
    if torch_model is not None:
        model.load_state_dict({k: mytorch.tensor(v.detach().numpy()) for k, v in torch_model.state_dict().items()})
    return model


def max_diff(a, b):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    return float(np.abs(np.asarray(a) - b.detach().numpy()).max())


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x_np, y_np = rng.standard_normal((32, 6)), rng.integers(0, 4, 32)
    t_model = build(torch)
    m_model = build(mytorch, t_model)
    xt, yt = torch.tensor(x_np), torch.tensor(y_np)
    xm, ym = mytorch.tensor(x_np), mytorch.tensor(y_np)
    t_loss_fn, m_loss_fn = torch.nn.CrossEntropyLoss(), nn.CrossEntropyLoss()

    checks = []
    def check(name, mine, theirs):
        d = max(max_diff(m, t) for m, t in zip(mine, theirs))
        checks.append(d <= TOL)
        print(f"{name:<40} max |diff| = {d:.1e}  {'PASS' if d <= TOL else 'FAIL'}")

    t_logits, m_logits = t_model(xt), m_model(xm)
    check("forward logits", [m_logits], [t_logits])
    t_loss, m_loss = t_loss_fn(t_logits, yt), m_loss_fn(m_logits, ym)
    check("cross-entropy loss", [m_loss], [t_loss])
    t_loss.backward(); m_loss.backward()
    t_params, m_params = dict(t_model.named_parameters()), dict(m_model.named_parameters())
    for name in t_params:
        check(f"gradient of {name}", [m_params[name].grad], [t_params[name].grad])

    def run(opt_t, opt_m, steps):
        for _ in range(steps):
            for model, opt, loss_fn, x, y in ((t_model, opt_t, t_loss_fn, xt, yt), (m_model, opt_m, m_loss_fn, xm, ym)):
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()

    def check_layers(label):
        for i in range(0, len(SIZES) - 1):
            names = [n for n in t_params if n.startswith(f"{2 * i}.")]
            check(f"{label}, layer {i}", [m_params[n] for n in names], [t_params[n] for n in names])

    run(torch.optim.SGD(t_model.parameters(), lr=0.1, momentum=0.9),
        optim.SGD(m_model.parameters(), lr=0.1, momentum=0.9), 1)
    check_layers("after one SGD-momentum step")
    opt_t, opt_m = torch.optim.Adam(t_model.parameters(), lr=1e-2), optim.Adam(m_model.parameters(), lr=1e-2)
    run(opt_t, opt_m, 1)
    check_layers("after one Adam step")
    run(opt_t, opt_m, 9)
    check("after ten Adam steps, all parameters", list(m_params.values()), list(t_params.values()))
    print(f"\n{sum(checks)}/{len(checks)} checks pass at {TOL:g} in float64")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
