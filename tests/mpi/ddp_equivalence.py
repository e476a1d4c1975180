"""Run under `mpiexec -n 2` (or any R dividing 16): DistributedDataParallel on shards of a batch against one process
on the whole batch, float64. Each rank prints one JSON line: the largest parameter difference per case."""
import json
import sys

import numpy as np

import mytorch
import mytorch.nn as nn
import mytorch.optim as optim
import mytorch.distributed as dist
from mytorch.nn.conv import Conv2d
from mytorch.nn.pooling import MaxPool2d
from mytorch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group('mpi')
rank, R = dist.get_rank(), dist.get_world_size()
B, STEPS = 16, 5
f64 = mytorch.float64

def mlp(g): return nn.Sequential(nn.Linear(6, 32, generator=g, dtype=f64), nn.Tanh(), nn.Linear(32, 32, generator=g, dtype=f64),
                                 nn.Tanh(), nn.Linear(32, 3, generator=g, dtype=f64))
def cnn(g): return nn.Sequential(Conv2d(1, 4, 3, padding=1, generator=g, dtype=f64), nn.ReLU(), MaxPool2d(2),
                                 Conv2d(4, 8, 3, padding=1, generator=g, dtype=f64), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(128, 3, generator=g, dtype=f64))
MODELS = {'mlp': (mlp, (6,)), 'cnn': (cnn, (1, 8, 8))}
OPTIMS = {'sgd': lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3), 'adam': lambda ps: optim.Adam(ps, lr=0.01)}
loss_fn = nn.CrossEntropyLoss()

def data(shape, seed):
    rng = np.random.default_rng(seed)
    return mytorch.tensor(rng.standard_normal((B, *shape))), mytorch.tensor(rng.integers(0, 3, B))

def params(m): return [p.detach().numpy().copy() for p in m.parameters()]
def maxdiff(a, b): return max(float(np.abs(x - y).max()) for x, y in zip(a, b))

def run(model_name, opt_name, sync=True, micro=1, **ddp_kw):
    "STEPS steps of DDP on this rank's shard; returns (DDP's final parameters, one process's on the whole batch, DDP)."
    make, shape = MODELS[model_name]
    ref = make(mytorch.Generator().manual_seed(0))
    local = make(mytorch.Generator().manual_seed(100 + rank))   # a different start on every rank: DDP copies rank 0's
    ddp = DDP(local, **ddp_kw)
    with mytorch.no_grad():
        for p, q in zip(ref.parameters(), ddp.module.parameters()): p.copy_(q)   # the reference starts where rank 0 did
    o_ddp, o_ref = OPTIMS[opt_name](ddp.parameters()), OPTIMS[opt_name](ref.parameters())
    n = B // R
    for step in range(STEPS):
        X, y = data(shape, step)
        o_ref.zero_grad(); loss_fn(ref(X), y).backward(); o_ref.step()
        Xs, ys = X[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
        o_ddp.zero_grad()
        m = n // micro
        for k in range(micro):   # gradient accumulation: every micro-batch but the last under no_sync
            xb, yb = Xs[k * m:(k + 1) * m], ys[k * m:(k + 1) * m]
            if k < micro - 1 or not sync:
                with ddp.no_sync(): (loss_fn(ddp(xb), yb) / micro).backward()
            else: (loss_fn(ddp(xb), yb) / micro).backward()
        o_ddp.step()
    return params(ddp.module), params(ref), ddp

out = {"rank": rank, "world_size": R}
for model_name in MODELS:
    for opt_name in OPTIMS:
        mine, ref, ddp = run(model_name, opt_name)
        out[f"{model_name}-{opt_name}"] = maxdiff(mine, ref)
        flat = mytorch.tensor(np.concatenate([p.ravel() for p in mine]))
        everyone = [mytorch.zeros_like(flat) for _ in range(R)]
        dist.all_gather(everyone, flat)
        out[f"{model_name}-{opt_name} ranks equal"] = all(np.array_equal(e.numpy(), flat.numpy()) for e in everyone)
        out[f"{model_name} buckets"] = len(ddp._buckets)
mine, ref, _ = run('mlp', 'adam', micro=2)
out["mlp-adam accumulated (no_sync)"] = maxdiff(mine, ref)
mine, ref, ddp = run('cnn', 'sgd', bucket_cap_mb=0.001)
out["cnn-sgd small buckets"], out["cnn small buckets"] = maxdiff(mine, ref), len(ddp._buckets)
mine, ref, _ = run('mlp', 'sgd', sync=False)   # the control: without averaging the ranks drift from the reference
out["mlp-sgd never synced"] = maxdiff(mine, ref)
out["state_dict keys"] = list(ddp.state_dict())[:2]
dist.destroy_process_group()
print(json.dumps(out))
