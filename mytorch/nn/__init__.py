"""mytorch.nn: layers, activations, losses and the Module they are built from.

Hand-written, like mytorch/__init__.py: the chapters of Part III export their own modules
(`mytorch.nn.module`, `mytorch.nn.layers`, ...), and this file gives their public names
PyTorch's addresses (`nn.Module`, `nn.Linear`, ...), importing the chapters in book order, so
a later chapter's name wins over an earlier one's. `nn.functional`, `nn.init` and `nn.utils`
are attributes, as in torch.nn, and `from mytorch.nn import *` gives what
`from torch.nn import *` gives: the classes, and those three submodules.
"""
from types import ModuleType as _ModuleType

from .module import *
from .layers import *
from .activation import *
from .loss import *
from .conv import *
from .pooling import *
from .normalization import *
from .recurrent import *
from .attention import *
from . import functional, init, utils, parallel

__all__ = [_n for _n, _v in globals().items() if not _n.startswith("_") and not isinstance(_v, _ModuleType)]
__all__ += ["functional", "init", "utils"]
