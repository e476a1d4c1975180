"""Every method of the framework's main classes carries its real name.

A method attached from a chapter other than its class's (with `mytorch.scalar.patch`) or written in
the class body has `__name__` equal to the attribute a reader calls, `__qualname__` equal to
`<Class>.<name>`, and the same name in its code object, which is what a traceback prints. So a
traceback through `x.cuda()` says `cuda`, not the name of a private function that was assigned to
`Tensor.cuda`. Two other forms are accepted, each checked for what makes it honest:

- the functional is the method (`Tensor.exp = exp`, as `torch.exp` and `Tensor.exp` are one op): the
  function is the public name of the same spelling in its own module;
- an alias (`Tensor.clip` is `Tensor.clamp`, as in PyTorch): listed in ALIASES with its reason, and
  the very object of the attribute it aliases.
"""
import sys
import traceback
import types

import pytest

import mytorch, mytorch.nn, mytorch.optim, mytorch.optim.lr_scheduler, mytorch.training, mytorch.diagnostics, mytorch.units
from mytorch import Tensor
from mytorch.nn import Module
from mytorch.optim import Optimizer
from mytorch.training import Run, Trainer
from mytorch.diagnostics import TrainingMonitor

# 'Class.name': (the attribute it is another name for, why it exists).
ALIASES = {
    'Tensor.__abs__': ('abs', "abs(x) calls x.__abs__(); PyTorch's Tensor.__abs__ is Tensor.abs"),
    'Tensor.clip': ('clamp', "PyTorch's alias of clamp"),
    'Tensor.clip_': ('clamp_', "PyTorch's alias of clamp_"),
    'Quantity.clip': ('clamp', "PyTorch's alias of clamp"),
    'Quantity.__int__': ('__float__', "both refuse to drop the unit, with one message"),
    'Quantity.mul': ('__mul__', "the method form of `*`: the same unit algebra"),
    'Quantity.div': ('__truediv__', "the method form of `/`: the same unit algebra"),
    'Quantity.pow': ('__pow__', "the method form of `**`: the same unit algebra"),
    'Quantity.add': ('__add__', "the method form of `+`: the same unit check"),
    'Quantity.sub': ('__sub__', "the method form of `-`: the same unit check"),
}

# Methods still attached under another function's name, in chapters being converted to `patch`:
# 12_elementwise, 15_indexing (Tensor), 28_recurrent (RNNBase, RNNCellBase), 30_optim (Optimizer).
# Each entry is expected to fail (strict xfail): remove it when its chapter is converted.
PENDING = set()   # every chapter converted


def _subclasses(cls) -> list:
    out = [cls]
    for s in cls.__subclasses__(): out += _subclasses(s)
    return out


def _classes() -> list:
    "Tensor, nn.Module, Run, Trainer, TrainingMonitor, the optimizers and the schedulers, with their subclasses in mytorch."
    roots = [Tensor, Module, Run, Trainer, TrainingMonitor, Optimizer]
    roots += [c for c in vars(mytorch.optim.lr_scheduler).values()
              if isinstance(c, type) and c.__module__ == 'mytorch.optim.lr_scheduler']
    found = {c for r in roots for c in _subclasses(r) if c.__module__.startswith('mytorch.')}
    return sorted(found, key=lambda c: (c.__module__, c.__name__))


def _functions(attr) -> list:
    "The Python functions behind a class attribute: a function, a property's accessors, a class or static method's function."
    if isinstance(attr, (classmethod, staticmethod)): attr = attr.__func__
    if isinstance(attr, property): return [f for f in (attr.fget, attr.fset, attr.fdel) if isinstance(f, types.FunctionType)]
    return [attr] if isinstance(attr, types.FunctionType) else []


METHODS = [(cls, name) for cls in _classes() for name, attr in vars(cls).items() if _functions(attr)]


def _problem(cls, name: str):
    "What is wrong with the name `cls.name` carries, or None."
    key = f"{cls.__name__}.{name}"
    if key in ALIASES:
        target = ALIASES[key][0]
        return None if vars(cls)[name] is vars(cls).get(target) else f"{key} is listed as an alias of {target} but is not it"
    for f in _functions(vars(cls)[name]):
        if f.__name__ == name and f.__qualname__ == key:
            # A function made by a factory (a closure) may keep its factory's code name; any other says `name` in tracebacks.
            if f.__closure__ is None and f.__code__.co_name != name:
                return f"{key}: tracebacks say {f.__code__.co_name!r} (its code's name), not {name!r}"
            continue
        module = sys.modules.get(f.__module__)
        if (f.__name__ == name == f.__qualname__ and not name.startswith('_') and getattr(module, name, None) is f
                and name in getattr(module, '__all__', ())):
            continue   # the functional is the method: mytorch.exp and Tensor.exp are one function
        return (f"{key} is the function {f.__module__}.{f.__qualname__} (__name__ {f.__name__!r}): attach it with "
                f"@patch as `def {name}(self:{cls.__name__}, ...)`")
    return None


@pytest.mark.parametrize('cls,name', [
    pytest.param(c, n, id=f"{c.__name__}.{n}",
                 marks=[pytest.mark.xfail(strict=True, reason='chapter not yet converted to patch')]
                 if f"{c.__name__}.{n}" in PENDING else [])
    for c, n in METHODS])
def test_method_carries_its_name(cls, name):
    problem = _problem(cls, name)
    assert problem is None, problem


def test_every_listed_name_exists():
    "ALIASES and PENDING name attributes that exist, so a stale entry cannot hide a renamed method."
    names = {f"{c.__name__}.{n}" for c, n in METHODS}
    assert not (set(ALIASES) | PENDING) - names, sorted((set(ALIASES) | PENDING) - names)


def test_the_walk_covers_the_classes_it_is_about():
    "The classes are found (a broken walk would make every test above pass vacuously)."
    names = {c.__name__ for c in _classes()}
    assert {'Tensor', 'Parameter', 'Module', 'Linear', 'MultiheadAttention', 'Run', 'Trainer', 'TrainingMonitor',
            'Optimizer', 'SGD', 'Adam', 'LRScheduler', 'StepLR', 'ReduceLROnPlateau'} <= names
    assert len(METHODS) > 300


def _frames(fn) -> list:
    "The function names in the traceback of the exception `fn()` raises."
    with pytest.raises(Exception) as info: fn()
    return [f.name for f in traceback.extract_tb(info.value.__traceback__)]


def test_tracebacks_name_the_method_called(tmp_path):
    t = mytorch.tensor([1.0, 2.0])
    assert 'cuda' in _frames(lambda: t.cuda())
    assert '__bool__' in _frames(lambda: bool(t))
    assert 'view' in _frames(lambda: t.view(3))
    assert 'register_buffer' in _frames(lambda: Module().register_buffer('a.b', None))
    assert 'get_submodule' in _frames(lambda: Module().get_submodule('missing'))
    mha = mytorch.nn.MultiheadAttention(4, 2)
    assert 'forward' in _frames(lambda: mha(t, t, t))
    with Run(tmp_path / 'run', catch_signals=False) as run: run.log(loss=1.0)
    assert 'curve' in _frames(lambda: run.curve('accuracy'))
