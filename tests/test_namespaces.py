"""The package's namespaces: `import mytorch` completes the Tensor, `mytorch` and `mytorch.nn` list their
public names in `__all__` as torch and torch.nn do, and the optional parts load on first use."""
import subprocess
import sys
import types

import pytest

import mytorch
import mytorch.nn as nn


def _fresh(code):
    "Run `code` in a new interpreter (nothing of mytorch imported yet) and return its stdout."
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_tensor_is_complete_whichever_module_is_imported_first():
    out = _fresh("from mytorch.engine import tensor\n"
                 "t = tensor([1.0, 2.0])\n"
                 "print((t - t).tolist(), t.exp().sum().item() > 10, t.reshape(2, 1).shape, (t @ t).item())")
    assert out.split() == ["[0.0,", "0.0]", "True", "(2,", "1)", "5.0"], out


def test_import_mytorch_loads_what_import_torch_loads_and_leaves_the_optional_parts():
    out = _fresh("import sys, mytorch\n"
                 "print(sorted(m for m in sys.modules if m.startswith('mytorch.') and not m.split('.')[-1].startswith('_')))")
    loaded = eval(out)
    for m in ("mytorch.engine", "mytorch.linalg", "mytorch.nn", "mytorch.nn.functional", "mytorch.nn.init",
              "mytorch.nn.utils", "mytorch.optim", "mytorch.autograd", "mytorch.autograd.functional",
              "mytorch.autograd.forward_ad", "mytorch.utils.data"):
        assert m in loaded, f"{m} not loaded by import mytorch"
    for m in ("mytorch.viz", "mytorch.widgets", "mytorch.training", "mytorch.diagnostics", "mytorch.datasets",
              "mytorch.serialization"):
        assert m not in loaded, f"{m} is optional and should load on first use"


def test_optional_parts_load_on_first_use():
    out = _fresh("import sys, mytorch\n"
                 "save, viz = mytorch.save, mytorch.viz\n"
                 "print(save.__module__, viz.__name__, 'mytorch.serialization' in sys.modules)")
    assert out.split() == ["mytorch.serialization", "mytorch.viz", "True"], out


def test_all_lists_the_public_names_and_only_names():
    names = set(mytorch.__all__)
    for n in ("tensor", "Tensor", "float32", "float", "long", "zeros", "exp", "sum", "matmul", "softmax",
              "Value", "gradcheck", "GradcheckError", "erf", "save", "load", "no_grad", "manual_seed"):
        assert n in names, n
    assert len(names) == len(mytorch.__all__), "duplicates in __all__"
    assert not [n for n in names if n.startswith("_")]
    assert not [n for n in names if isinstance(getattr(mytorch, n), types.ModuleType)], "submodules are attributes, not __all__ names"
    assert mytorch.float is mytorch.float32 and mytorch.erf is mytorch.nn.activation.erf


def test_star_import_and_dir():
    ns = {}
    exec("from mytorch import *", ns)
    assert set(mytorch.__all__) <= set(ns) and ns["tensor"] is mytorch.tensor and ns["save"] is mytorch.save
    d = dir(mytorch)
    assert set(mytorch.__all__) <= set(d)
    assert {"nn", "optim", "autograd", "utils", "viz", "widgets", "training", "datasets"} <= set(d)


def test_top_level_names_are_the_ops_and_nn_names_are_the_modules():
    "torch.Tanh does not exist, but where a name is in both, each namespace keeps its own chapter's meaning."
    assert mytorch.Tanh is mytorch.elementwise.Tanh and nn.Tanh is mytorch.nn.activation.Tanh
    assert issubclass(nn.Tanh, nn.Module)


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        mytorch.not_a_name
    assert not hasattr(mytorch, "_private")


def test_nn_star_import_gives_the_classes_and_submodules_as_torch_nn_does():
    ns = {}
    exec("from mytorch.nn import *", ns)
    for n in ("Module", "Parameter", "Linear", "ReLU", "Conv2d", "LSTM", "CrossEntropyLoss", "LayerNorm",
              "MultiheadAttention", "functional", "init", "utils"):
        assert n in ns, n
    assert "importlib" not in ns
    assert ns["functional"] is nn.functional and ns["Linear"] is nn.layers.Linear
    assert all(hasattr(nn, n) for n in nn.__all__)


def test_nn_matches_torch_nn_on_shared_names():
    "Every class both torch.nn and mytorch.nn export with `*` is reachable as nn.X in both."
    torch_nn = pytest.importorskip("torch.nn")
    theirs = {}
    exec("from torch.nn import *", theirs)
    ours = set(nn.__all__)
    shared = {n for n in theirs if n[:1].isupper()} & ours
    assert len(shared) > 50, sorted(shared)
    assert {"functional", "init", "utils"} <= ours & set(theirs)
