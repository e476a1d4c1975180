"""Cython kernels against their NumPy references: `python benchmarks/kernels.py`.

Prints one row per kernel, dtype and size (1e2 to 1e6): the best-of-N time of the NumPy
reference and of the compiled kernel, their ratio (NumPy time / Cython time, above 1 means
the kernel is faster) and the verdict. Wins and losses are both printed. Then, per kernel,
the geometric mean of its ratios (`enabled_by_default` in `mytorch.kernels` is on when it is
at least 1.1) and whether this run agrees with the committed default.

The NumPy column depends on BLAS (`sum_of_squares`'s reference is `np.dot`) and on how many
threads BLAS may use, so the header says which BLAS and how many threads. On a machine whose
cores are busy with other work, a threaded BLAS can be many times slower than its best;
`--blas-threads 1` pins it to one thread for a like-for-like comparison with the kernels,
which are single-threaded. Takes about 20-60 seconds.

Every kernel is in one registry (`compiled_kernel` in `mytorch.kernels`): the two of the kernels
chapter, and those the later chapters register for their own NumPy functions (im2col and col2im
in `mytorch.nn.conv`, the max pool and its scatter-add in `mytorch.nn.pooling`, and whatever
`mytorch.indexing`, `mytorch.nn.normalization`, `mytorch.nn.recurrent` and `mytorch.optim`
register). A kernel is registered when its module is imported, so this script imports them all
and times every registered kernel, with its bench arguments of about `size` numbers, each side
behind the kernel's check, as a call runs it. `--kernels im2col,col2im` limits the run to some
of them.
"""
import argparse
import os
import platform
import sys
import time
from pathlib import Path

SIZES = (100, 1_000, 10_000, 100_000, 1_000_000)
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# the modules whose import registers the compiled kernels of later chapters (`compiled_kernel`)
KERNEL_MODULES = ("mytorch.indexing", "mytorch.nn.layers", "mytorch.nn.conv", "mytorch.nn.pooling",
                  "mytorch.nn.normalization", "mytorch.nn.recurrent", "mytorch.optim")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=11, help="timing runs per implementation; the fastest is kept (default 11)")
    p.add_argument("--budget", type=float, default=0.01, help="seconds per timing run (default 0.01)")
    p.add_argument("--sizes", type=lambda s: tuple(int(float(v)) for v in s.split(",")), default=SIZES,
                   help="comma-separated array lengths (default 1e2,1e3,1e4,1e5,1e6)")
    p.add_argument("--blas-threads", type=int, default=None,
                   help="set OPENBLAS/OMP/MKL_NUM_THREADS before NumPy loads (default: leave them as they are)")
    p.add_argument("--kernels", type=lambda s: [k for k in s.split(",") if k], default=None,
                   help="comma-separated kernel names (default: every kernel registered)")
    return p.parse_args(argv)


def blas_report(np):
    "Lines naming the BLAS NumPy uses and its threads (via threadpoolctl when installed)."
    lines = [f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, {platform.machine()}"]
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
        lines.append(f"BLAS (build): {blas.get('name')} {blas.get('version')}")
    except Exception:  # the config layout is NumPy's, not ours; it may change
        lines.append("BLAS (build): unknown")
    env = ", ".join(f"{v}={os.environ[v]}" for v in THREAD_VARS if v in os.environ) or "none set"
    lines.append(f"thread variables: {env}")
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        lines.append("BLAS threads at run time: not shown (threadpoolctl is not installed)")
    else:
        for pool in threadpool_info():
            lines.append(f"thread pool: {pool.get('internal_api')} {pool.get('version')}, "
                         f"{pool.get('num_threads')} threads ({Path(pool.get('filepath', '')).name})")
    return lines


def table(rows):
    "`benchmark` rows as a fixed-width table, like mytorch.kernels.benchmark_table with room for long kernel names."
    width = max([len("kernel")] + [len(r["kernel"]) for r in rows]) + 2
    lines = [f"{'kernel':<{width}}{'dtype':<9}{'size':>11}{'NumPy µs':>12}{'Cython µs':>12}{'ratio':>8}  verdict"]
    lines += [f"{r['kernel']:<{width}}{r['dtype']:<9}{r['size']:>11,}{r['numpy_us']:>12.2f}{r['cython_us']:>12.2f}"
              f"{r['ratio']:>7.2f}x  {r['verdict']}" for r in rows]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.blas_threads is not None:  # must happen before NumPy (and its BLAS) is imported
        for v in THREAD_VARS:
            os.environ[v] = str(args.blas_threads)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's mytorch, installed or not
    import importlib
    import numpy as np
    import mytorch.kernels as k
    for module in KERNEL_MODULES:
        importlib.import_module(module)

    print("\n".join(blas_report(np)))
    print(f"kernels: {k.kernel_backend()}")
    if all(v.compiled is None for v in k._registry.values()):
        print(f"\nNothing to compare: {k.kernel_backend()}. Build the extensions with "
              "`python setup.py build_ext --inplace` (or `make kernels`).")
        return 1
    print(f"timing: best of {args.repeat} runs of ~{args.budget * 1e3:g} ms each, NumPy and Cython alternating\n")
    start = time.perf_counter()
    runnable = [n for n, v in k._registry.items() if v.bench is not None and v.compiled is not None]
    skipped = [f"{n} ({v.missing if v.compiled is None else 'no bench arguments'})" for n, v in k._registry.items()
               if n not in runnable]
    if skipped: print("not timed: " + "; ".join(skipped))
    names = runnable if args.kernels is None else args.kernels
    unknown = [n for n in names if n not in runnable]
    if unknown:
        print(f"No compiled kernel to time named {', '.join(unknown)}; the kernels here are {', '.join(runnable)}.")
        return 1
    rows = k.benchmark(sizes=args.sizes, repeat=args.repeat, budget=args.budget, kernels=names)
    print(table(rows))
    wins = sum(r["verdict"] == "win" for r in rows)
    print(f"\n{wins} wins, {len(rows) - wins} losses")
    measured, gmeans = k.measured_defaults(rows), k.geometric_mean_ratios(rows)
    print("on by default when the geometric-mean ratio is at least 1.1 (mytorch.kernels.measured_defaults):")
    for name, on in measured.items():
        if name in k.KERNELS:
            committed, field, where = k.enabled_by_default[name], "enabled_by_default", "nbs/91_kernels.ipynb"
        else:
            kernel = k._registry[name]
            committed, field, where = kernel.default, "default", f"its @compiled_kernel line ({kernel.reference.__module__})"
        note = "agrees" if on == committed else f"DISAGREES: review {field} in {where}"
        print(f"  {name}: {gmeans[name]:.2f}x -> {'on' if on else 'off'} by this run; {field}={committed} ({note})")
    print(f"\n({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
