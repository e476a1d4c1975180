"""Twin runs: short PyTorch programs, run once with PyTorch and once with mytorch standing in for `torch`.

Each program in tests/programs/ is written as a PyTorch user writes it (`import torch`, `torch.nn`,
`torch.optim`, `torch.utils.data`) and prints named numbers, one per line: `name value [value ...]`.
Its header states how the two runs are compared:

- `# tolerance: T` -- every printed value agrees: |mytorch - torch| <= T * max(1, |torch|). Deterministic
  programs (weights written in by the program, float64) state a tight T; float32 ones a T derived from
  float32's epsilon (1.2e-7) and the length of the computation.
- `# bound: NAME < VALUE` (or `>`, `<=`, `>=`) -- a plausibility check that must hold in both runs, for
  seeded random programs: the two libraries draw different random streams from the same seed, so
  their numbers differ, but a training run must reach the same quality.
- `# same: NAME ...` -- values that must be equal in both runs even when the rest is checked by bounds
  (counts, shapes).

In both kinds the two runs print the same names in the same order. A program that does not run
under mytorch, or whose numbers diverge, is marked in DIVERGES with what differs: an expected failure
(strict), so the mark must be removed once mytorch is fixed.

Both libraries are imported once per run, in two processes started in parallel; each program then runs
in a fork of its library's process, with fresh state.  `python tests/test_programs.py torch|mytorch
PROGRAM...` runs programs by hand and prints what each printed.
"""
import json
import math
import operator
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
PROGRAMS = sorted(p for p in (HERE / "programs").glob("*.py") if not p.name.startswith("_"))
TIMEOUT_S = 60   # per program

# What diverges today, program by program (the PyTorch behaviour in brackets). Fixing mytorch makes the
# strict xfail fail: then remove the entry.
DIVERGES = {
}


# ---------------------------------------------------------------------------------------------------
# The runner: executed as a script (`python test_programs.py LIB PROGRAM...`), it imports LIB once and
# runs each program in a forked child, collecting stdout, stderr and the exit status as JSON.

def _install_mytorch_as_torch():
    "Make `import torch` (and its submodules a program imports) give mytorch."
    import importlib
    import mytorch
    for sub in ("nn", "nn.functional", "nn.init", "nn.utils", "optim", "optim.lr_scheduler", "utils",
                "utils.data", "autograd", "autograd.functional"):
        importlib.import_module(f"mytorch.{sub}")
    for name, module in list(sys.modules.items()):
        if name == "mytorch" or name.startswith("mytorch."):
            sys.modules["torch" + name[len("mytorch"):]] = module


def _run_forked(path:str) -> dict:
    "Run one program in a forked child; its stdout, stderr and exit status."
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: run the program as __main__, then leave without cleanup
        os.dup2(out_w, 1); os.dup2(err_w, 2)
        for fd in (out_r, err_r, out_w, err_w): os.close(fd)
        code = 0
        try:
            import runpy, signal
            signal.alarm(TIMEOUT_S)
            sys.argv = [path]
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e: code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)
    os.close(out_w); os.close(err_w)
    import threading
    chunks = {out_r: [], err_r: []}
    def drain(fd):
        while data := os.read(fd, 65536): chunks[fd].append(data)
    readers = [threading.Thread(target=drain, args=(fd,)) for fd in (out_r, err_r)]
    for t in readers: t.start()
    _, status = os.waitpid(pid, 0)
    for t in readers: t.join()
    os.close(out_r); os.close(err_r)
    return dict(stdout=b"".join(chunks[out_r]).decode(), stderr=b"".join(chunks[err_r]).decode()[-4000:],
                rc=os.waitstatus_to_exitcode(status))


def _warm_up():
    "Pay once, before the forks, what a library loads on first use (PyTorch imports its compiler on the first step)."
    import torch, torch.utils.data
    if hasattr(torch, "set_num_threads"): torch.set_num_threads(1)   # threads and fork do not mix
    p = torch.nn.Parameter(torch.zeros(2))
    p.sum().backward()
    for make in (torch.optim.SGD, torch.optim.Adam):
        make([p], lr=0.1).step()
    list(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(4, 1)), batch_size=2, shuffle=True))


def _runner_main(lib:str, paths:list):
    if lib == "mytorch": _install_mytorch_as_torch()
    _warm_up()
    results = {}
    for p in paths:
        start = time.perf_counter()
        results[p] = _run_forked(p)
        results[p]["seconds"] = round(time.perf_counter() - start, 2)
    sys.stdout.write(json.dumps(results))


# ---------------------------------------------------------------------------------------------------
# The comparison.

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def header_rules(path:Path) -> dict:
    "The comparison rules stated in a program's leading comment lines."
    rules = dict(tolerance=None, bounds=[], same=[])
    for line in path.read_text().splitlines():
        if not line.startswith("#"): break
        if m := re.match(r"#\s*tolerance:\s*([0-9.eE+-]+)", line): rules["tolerance"] = float(m.group(1))
        elif m := re.match(r"#\s*bound:\s*(\w+)\s*(<=|>=|<|>)\s*([0-9.eE+-]+)", line):
            rules["bounds"].append((m.group(1), m.group(2), float(m.group(3))))
        elif m := re.match(r"#\s*same:\s*(.+)", line): rules["same"] += m.group(1).split()
    assert rules["tolerance"] is not None or rules["bounds"], f"{path.name} states no tolerance and no bound"
    return rules


def _value(token:str):
    token = token.strip("[](),")
    try: return float(token)
    except ValueError: return token


def printed(stdout:str) -> list:
    "The named values a program printed: [(name, [value, ...]), ...]; values are floats where they parse."
    rows = []
    for line in stdout.splitlines():
        name, *rest = line.replace(",", " ").split()
        rows.append((name, [_value(t) for t in rest if t.strip("[](),")]))
    return rows


def _close(a, b, tol) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b): return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= tol * max(1.0, abs(b))
    return a == b


def compare(rules:dict, ours:list, theirs:list) -> list:
    "What differs between the two runs under the program's rules (empty when they agree)."
    problems = []
    names_ours, names_theirs = [n for n, _ in ours], [n for n, _ in theirs]
    if names_ours != names_theirs:
        return [f"printed names differ: mytorch {names_ours} vs torch {names_theirs}"]
    for (name, a), (_, b) in zip(ours, theirs):
        if len(a) != len(b): problems.append(f"{name}: {len(a)} values vs torch's {len(b)}")
        elif rules["tolerance"] is not None:
            bad = [(x, y) for x, y in zip(a, b) if not _close(x, y, rules["tolerance"])]
            if bad: problems.append(f"{name}: mytorch {bad[0][0]!r} vs torch {bad[0][1]!r} "
                                    f"(tolerance {rules['tolerance']:g}; {len(bad)} of {len(a)} values differ)")
        elif name in rules["same"] and a != b: problems.append(f"{name}: mytorch {a} vs torch {b} (must be equal)")
    for run, rows in (("mytorch", ours), ("torch", theirs)):
        values = dict(rows)
        for name, op, limit in rules["bounds"]:
            if name not in values: problems.append(f"{run} printed no {name!r} (bound {name} {op} {limit:g})")
            elif not _OPS[op](values[name][-1], limit):
                problems.append(f"{run}: {name} = {values[name][-1]!r}, not {op} {limit:g}")
    return problems


# ---------------------------------------------------------------------------------------------------
# The tests.

if __name__ != "__main__":
    import pytest

    def _run_all(lib:str) -> subprocess.Popen:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
        return subprocess.Popen([sys.executable, __file__, lib, *map(str, PROGRAMS)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=HERE.parent)

    @pytest.fixture(scope="module")
    def runs():
        "Every program's output under both libraries; the two runners work in parallel."
        procs = {lib: _run_all(lib) for lib in ("torch", "mytorch")}
        results = {}
        for lib, proc in procs.items():
            out, err = proc.communicate(timeout=TIMEOUT_S * len(PROGRAMS))
            assert proc.returncode == 0, f"the {lib} runner failed:\n{err[-3000:]}"
            results[lib] = json.loads(out)
        return results

    def test_corpus_size():
        assert len(PROGRAMS) >= 25, [p.name for p in PROGRAMS]

    @pytest.mark.parametrize("path", [
        pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(strict=True, reason=DIVERGES[p.stem])]
                     if p.stem in DIVERGES else []) for p in PROGRAMS])
    def test_program(runs, path):
        theirs, ours = runs["torch"][str(path)], runs["mytorch"][str(path)]
        assert theirs["rc"] == 0, f"{path.name} fails under PyTorch itself:\n{theirs['stderr']}"
        assert printed(theirs["stdout"]), f"{path.name} printed nothing under PyTorch"
        assert ours["rc"] == 0, f"{path.name} fails under mytorch:\n{ours['stderr']}"
        problems = compare(header_rules(path), printed(ours["stdout"]), printed(theirs["stdout"]))
        assert not problems, f"{path.name}: " + "; ".join(problems)

    @pytest.mark.parametrize("ours, theirs, rules, ok", [
        ("loss 1.0\n", "loss 1.0000000001\n", dict(tolerance=1e-9, bounds=[], same=[]), True),
        ("loss 1.0\n", "loss 1.001\n", dict(tolerance=1e-9, bounds=[], same=[]), False),
        ("loss 0.5\nn 3\n", "loss 0.01\nn 3\n", dict(tolerance=None, bounds=[("loss", "<", 0.1)], same=["n"]), False),
        ("loss 0.05\nn 4\n", "loss 0.01\nn 3\n", dict(tolerance=None, bounds=[("loss", "<", 0.1)], same=["n"]), False),
        ("loss 0.05\nn 3\n", "loss 0.01\nn 3\n", dict(tolerance=None, bounds=[("loss", "<", 0.1)], same=["n"]), True),
        ("a 1.0\n", "b 1.0\n", dict(tolerance=1.0, bounds=[], same=[]), False),
    ])
    def test_compare_can_fail(ours, theirs, rules, ok):
        "The comparison itself: it passes agreeing runs and catches each kind of difference."
        assert (compare(rules, printed(ours), printed(theirs)) == []) == ok

else:
    _runner_main(sys.argv[1], sys.argv[2:])
