"""Data-parallel training throughput on 1 and 2 ranks, and where the time goes (communication or compute).

    python benchmarks/ddp.py            # launches itself under mpiexec with 1 and 2 ranks and prints the tables
    python benchmarks/ddp.py --quick    # fewer steps (the book's chapter runs this)

For each model and rank count: milliseconds per training step of one global batch (split over the ranks), samples per
second, the same step under no_sync() (compute only, no gradient averaging), the time of one all_reduce of all the
gradients, and the share of a step that synchronization adds (bucket copies and the all_reduce: 1 - no_sync / step).
A second table times all_reduce alone for a range of message sizes, for the latency-bandwidth model.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

import mytorch
import mytorch.nn as nn
import mytorch.optim as optim
import mytorch.distributed as dist
from mytorch.nn.parallel import DistributedDataParallel

MODELS = {"mlp-small": (64, [32], 10), "mlp-large": (256, [1024, 1024], 10)}   # inputs, hidden widths, outputs
BATCH = 256   # the global batch


def make(n_in, hidden, n_out):
    g, layers, prev = mytorch.Generator().manual_seed(0), [], n_in
    for h in hidden: layers += [nn.Linear(prev, h, generator=g), nn.ReLU()]; prev = h
    return nn.Sequential(*layers, nn.Linear(prev, n_out, generator=g))


def best_time(f, repeat):
    "The fastest of `repeat` runs of f(), in seconds, after one warm-up; all ranks start each run together."
    f()
    times = []
    for _ in range(repeat):
        dist.barrier()
        t0 = time.perf_counter(); f(); t = time.perf_counter() - t0
        tt = mytorch.tensor([t], dtype=mytorch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)   # a step takes as long as its slowest rank
        times.append(tt.item())
    return min(times)


def worker(steps):
    dist.init_process_group("mpi")
    rank, R = dist.get_rank(), dist.get_world_size()
    rows = []
    for name, spec in MODELS.items():
        model = DistributedDataParallel(make(*spec))
        opt, loss_fn = optim.SGD(model.parameters(), lr=0.01), nn.CrossEntropyLoss()
        rng = np.random.default_rng(rank)
        x = mytorch.tensor(rng.standard_normal((BATCH // R, spec[0])).astype(np.float32))
        y = mytorch.tensor(rng.integers(0, spec[2], BATCH // R))
        def step():
            opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
        def local_step():
            with model.no_sync(): step()
        n_params = sum(p.numel() for p in model.parameters())
        grads = mytorch.zeros(n_params)
        t_step = best_time(lambda: [step() for _ in range(steps)], 5) / steps
        t_local = best_time(lambda: [local_step() for _ in range(steps)], 5) / steps
        t_comm = best_time(lambda: dist.all_reduce(grads), 3 * steps)
        rows.append(dict(model=name, params=n_params, ranks=R, step_ms=1e3 * t_step, samples_per_s=BATCH / t_step,
                         local_ms=1e3 * t_local, all_reduce_ms=1e3 * t_comm))
    sizes = []
    for n in (1, 1_000, 10_000, 100_000, 1_000_000):
        buf = mytorch.zeros(n)
        sizes.append(dict(floats=n, ranks=R, ms=1e3 * best_time(lambda: dist.all_reduce(buf), 20)))
    if rank == 0: print(json.dumps({"steps": rows, "sizes": sizes}))
    dist.destroy_process_group()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 steps per timing instead of 10")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    steps = 3 if args.quick else 10
    if args.worker: return worker(steps)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # one core per rank: R ranks use R cores, not R x BLAS threads
    results = {}
    for R in (1, 2):
        out = dist.launch(R, __file__, "--worker", *(["--quick"] if args.quick else []), timeout=600).stdout
        results[R] = json.loads(out.strip().splitlines()[-1])
    print(f"Data-parallel SGD steps, global batch {BATCH} split over the ranks (float32, one BLAS thread per rank; best of 5 x {steps} steps)\n")
    print(f"{'model':<10} {'params':>9} {'ranks':>5} {'step ms':>8} {'samples/s':>10} {'no_sync ms':>10} "
          f"{'all_reduce ms':>13} {'sync share':>10}")
    for R in (1, 2):
        for r in results[R]["steps"]:
            share = max(r["step_ms"] - r["local_ms"], 0.0) / r["step_ms"]
            print(f"{r['model']:<10} {r['params']:>9,} {R:>5} {r['step_ms']:>8.2f} {r['samples_per_s']:>10,.0f} "
                  f"{r['local_ms']:>10.2f} {r['all_reduce_ms']:>13.3f} {share:>10.0%}")
    print("\nall_reduce (SUM) of a float32 tensor, best of 20\n")
    print(f"{'floats':>10} {'bytes':>10} {'1 rank ms':>10} {'2 ranks ms':>10}")
    for a, b in zip(results[1]["sizes"], results[2]["sizes"]):
        print(f"{a['floats']:>10,} {4 * a['floats']:>10,} {a['ms']:>10.4f} {b['ms']:>10.4f}")
    return results


if __name__ == "__main__":
    main()
