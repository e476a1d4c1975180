"""Run under mpiexec (any number of ranks): every collective of mytorch.distributed, checked on every rank against
values each rank can compute alone. Prints one JSON line per rank; any failed check exits non-zero."""
import json

import numpy as np

import mytorch
import mytorch.distributed as dist
from mytorch.distributed import ReduceOp

try:   # a world size that disagrees with mpiexec's is refused (collectively: every rank asks)
    dist.init_process_group('mpi', world_size=99)
    raise AssertionError("world_size=99 was accepted")
except ValueError as e:
    assert "mpiexec gave this process world_size=" in str(e), e
dist.init_process_group('mpi')
try:
    dist.init_process_group('mpi')
    raise AssertionError("a second init_process_group was accepted")
except ValueError as e:
    assert "twice" in str(e), e
rank, R = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == 'mpi'

def value(r, dtype):   # what rank r contributes: distinct per rank, exact in every dtype used
    return np.array([r + 1, 2 * r - 1, 3, -(r % 2) - 1], dtype=dtype)

everyone = lambda dtype: np.stack([value(r, dtype) for r in range(R)])
expected = {ReduceOp.SUM: lambda a: a.sum(0), ReduceOp.PRODUCT: lambda a: a.prod(0),
            ReduceOp.MIN: lambda a: a.min(0), ReduceOp.MAX: lambda a: a.max(0)}
checked = 0
for dtype in (np.float64, np.float32, np.float16, np.int64, np.int32):
    for op, f in expected.items():
        t = mytorch.tensor(value(rank, dtype))
        v = t._version
        assert dist.all_reduce(t, op=op) is None
        np.testing.assert_array_equal(t.numpy(), f(everyone(dtype)).astype(dtype))
        assert t.dtype == mytorch.tensor(value(0, dtype)).dtype and t._version == v + 1
        checked += 1
    if np.dtype(dtype).kind == 'f':
        t = mytorch.tensor(value(rank, dtype))
        dist.all_reduce(t, op=ReduceOp.AVG)
        np.testing.assert_allclose(t.numpy(), everyone(dtype).sum(0) / R, rtol=np.finfo(dtype).eps * R)
    else:
        try:
            dist.all_reduce(mytorch.tensor(value(rank, dtype)), op=ReduceOp.AVG)
            raise AssertionError("AVG of integers was accepted")
        except RuntimeError as e: assert "can't be cast" in str(e), e

# in place on a strided view: the base sees the result
base = mytorch.tensor(np.arange(12.0).reshape(3, 4) * (rank + 1))
view = base[:, ::2]
dist.all_reduce(view)
want = np.arange(12.0).reshape(3, 4) * (rank + 1)
want[:, ::2] = np.arange(12.0).reshape(3, 4)[:, ::2] * sum(range(1, R + 1))
np.testing.assert_array_equal(base.numpy(), want)

for src in range(R):
    t = mytorch.tensor(value(rank, np.float64))
    dist.broadcast(t, src=src)
    np.testing.assert_array_equal(t.numpy(), value(src, np.float64))
    outs = [mytorch.zeros(4, dtype=mytorch.float64) for _ in range(R)]
    dist.all_gather(outs, mytorch.tensor(value(rank, np.float64)))
    np.testing.assert_array_equal(np.stack([o.numpy() for o in outs]), everyone(np.float64))
    t = mytorch.tensor(value(rank, np.float64))
    dist.reduce(t, dst=src, op=ReduceOp.MAX)
    np.testing.assert_array_equal(t.numpy(), everyone(np.float64).max(0) if rank == src else value(rank, np.float64))

work = dist.all_reduce(t := mytorch.tensor(value(rank, np.float64)), async_op=True)
assert work.wait() is True and work.is_completed()
np.testing.assert_array_equal(t.numpy(), everyone(np.float64).sum(0))
dist.barrier()

for bad, needle in [(lambda: dist.broadcast(mytorch.zeros(2), src=R), f"invalid root rank src={R}"),
                    (lambda: dist.all_reduce([1.0, 2.0]), "expected parameter `tensor` of type Tensor"),
                    (lambda: dist.all_gather([mytorch.zeros(2)] * (R + 1), mytorch.zeros(2)), f"world_size={R} tensors"),
                    (lambda: dist.all_gather([mytorch.zeros(3)] * R, mytorch.zeros(2)), "every entry must match"),
                    (lambda: dist.all_reduce(mytorch.tensor([True]), op=ReduceOp.SUM), "cannot reduce a bool tensor")]:
    try:
        bad()
        raise AssertionError(f"accepted: {needle}")
    except (RuntimeError, TypeError) as e: assert needle in str(e), (needle, str(e))

dist.destroy_process_group()
assert not dist.is_initialized()
print(json.dumps({"rank": rank, "world_size": R, "all_reduce_cases": checked, "ok": True}))
