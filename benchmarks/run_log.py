"""What one `Run.log` call costs at the start of a run and after 100,000 entries.

A run record is a header (run.json, replaced atomically when the run starts and ends) and an
append-only file of entries (metrics.jsonl), so an entry should cost the same whatever came
before it: the time of encoding it and one write() system call, and its own bytes. This script
measures both, for a default Run (a write per call, a sync at most every 10 seconds) and for one
with fsync=False, over the first 1,000 entries and over 1,000 entries after the first 100,000.
Each window is timed as 5 blocks of 200 calls; the table shows the median block (and the
slowest, which catches the periodic sync or a garbage collection); the bytes handed to write()
come from Linux's /proc/self/io:

    .venv/bin/python benchmarks/run_log.py
    .venv/bin/python benchmarks/run_log.py --entries 20000     # shorter
"""
import os
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"
import argparse
import statistics
import tempfile
import time
from pathlib import Path

from mytorch.training import Run

BLOCKS, BLOCK = 5, 200


def bytes_written():
    "Bytes this process has handed to write() so far, or None without /proc/self/io."
    try: return int(dict(l.split(': ') for l in Path('/proc/self/io').read_text().splitlines())['wchar'])
    except OSError: return None


def window(run, step):
    "(median µs per call over the blocks, slowest block's µs per call, bytes per call) for the next BLOCKS*BLOCK calls."
    times, b0 = [], bytes_written()
    for _ in range(BLOCKS):
        t0 = time.perf_counter()
        for _ in range(BLOCK):
            run.log(loss=1.0 / (step + 1), accuracy=0.5, lr=1e-3)
            step += 1
        times.append((time.perf_counter() - t0) / BLOCK * 1e6)
    b1 = bytes_written()
    return statistics.median(times), max(times), None if b0 is None else (b1 - b0) / (BLOCKS * BLOCK)


def measure(directory, entries, **kw):
    run = Run(directory, **kw)
    first = window(run, 0)
    t0, step = time.perf_counter(), BLOCKS * BLOCK
    while step < entries:
        run.log(loss=1.0 / (step + 1), accuracy=0.5, lr=1e-3)
        step += 1
    fill_s = time.perf_counter() - t0
    later = window(run, step)
    t0 = time.perf_counter()
    run.finish()
    finish_ms = (time.perf_counter() - t0) * 1e3
    size = run.metrics_path.stat().st_size
    t0 = time.perf_counter()
    n = len(Run.load(directory).metrics)
    load_s = time.perf_counter() - t0
    return first, later, fill_s, finish_ms, size, n, load_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000, help="entries before the second window (default 100,000)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix='mytorch-run-log-') as tmp:
        warm = Run(Path(tmp) / 'warm-up', fsync=False)        # imports, caches, the allocator: not the first window's cost
        for i in range(2000): warm.log(loss=float(i), accuracy=0.5, lr=1e-3)
        warm.finish()
        print(f"Run.log(loss=..., accuracy=..., lr=...): {BLOCKS} blocks of {BLOCK} calls per window, µs per call\n")
        print(f"{'settings':<22}{'entries':>18}{'median µs':>11}{'slowest':>9}{'bytes/call':>12}{'later/first':>13}")
        results = {}
        for label, kw in (('default (fsync)', {}), ('fsync=False', {'fsync': False})):
            first, later, fill_s, finish_ms, size, n, load_s = measure(Path(tmp) / label.split()[0], args.entries, **kw)
            results[label] = (first, later)
            ratio = later[0] / first[0]
            for name, (med, worst, nbytes), r in ((f"0-{BLOCKS * BLOCK - 1:,}", first, ''),
                                                  (f"{args.entries:,}-{args.entries + BLOCKS * BLOCK - 1:,}", later, f"{ratio:.2f}x")):
                b = '-' if nbytes is None else f"{nbytes:.0f}"
                print(f"{label:<22}{name:>18}{med:>11.2f}{worst:>9.2f}{b:>12}{r:>13}")
            print(f"{'':<22}filling to {args.entries:,}: {fill_s:.1f} s ({fill_s / args.entries * 1e6:.1f} µs per call); "
                  f"finish {finish_ms:.1f} ms; metrics.jsonl {size / 1e6:.1f} MB, Run.load of {n:,} entries {load_s:.2f} s")
        worst = max(later[0] / first[0] for first, later in results.values())
        print(f"\nlater/first: the median cost per call after {args.entries:,} entries over that of the first ones; "
              f"the worst here is {worst:.2f}x.")


if __name__ == "__main__":
    main()
