"""mytorch.utils: hand-written, like mytorch/__init__.py. `mytorch.utils.data` (chapter 33_data)
and `mytorch.utils.checkpoint` (chapter 42) are imported here so that they are reachable as attributes, as
`torch.utils.data` and `torch.utils.checkpoint` are."""
from . import data, checkpoint
