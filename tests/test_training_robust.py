"""The training loop under stress: checkpoints that load whole or not at all, run records that survive SIGTERM and
crashes, and a run log whose cost per entry does not grow with the run.

The signal tests start real child processes and send them real signals; every wait is bounded."""
import json
import os
import selectors
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import mytorch
import mytorch.nn as nn
from mytorch import Generator, Tensor
from mytorch.creation import get_rng_state
from mytorch.optim import SGD, Adam
from mytorch.optim.lr_scheduler import ExponentialLR, StepLR
from mytorch.serialization import load, save
from mytorch.training import Run, Trainer
from mytorch.utils.data import DataLoader, TensorDataset

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 60          # the longest any child process may take to reach a point or to end
posix_only = pytest.mark.skipif(not hasattr(signal, 'SIGKILL'), reason="POSIX signals")


# ---------------------------------------------------------------------------------------------------------------------
# Checkpoints: all or nothing

def data(seed=0, n=64):
    "The same 64 points each time, in batches of 16 shuffled by a generator seeded with `seed`."
    x = mytorch.randn(n, 2, generator=Generator().manual_seed(123))
    y = (x[:, 0] * x[:, 1] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=Generator().manual_seed(seed))


def model(seed):
    mytorch.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))


def make_trainer(seed=0, groups=1, scheduler=None, opt=Adam, reverse=False):
    m = model(seed)
    params = list(m.parameters())
    if reverse: params = params[::-1]
    if groups == 1: o = opt(params, lr=0.01)
    else: o = opt([{'params': params[::2]}, {'params': params[1::2], 'lr': 0.001}], lr=0.01)
    return Trainer(m, nn.CrossEntropyLoss(), o, scheduler=None if scheduler is None else scheduler(o))


def plain(x):
    "Tensors as lists, recursively, so that whole states compare with ==."
    if isinstance(x, Tensor): return x.numpy().tolist()
    if isinstance(x, dict): return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)): return [plain(v) for v in x]
    return x


def state(t, loader):
    return plain({'model': t.model.state_dict(), 'optimizer': t.optimizer.state_dict(),
                  'scheduler': None if t.scheduler is None else t.scheduler.state_dict(),
                  'counters': [t.epoch, t.step, t.history], 'rng': get_rng_state(),
                  'loader': [loader.generator.get_state()]})


@pytest.fixture
def checkpoint(tmp_path):
    "A checkpoint of two epochs of a one-group Adam trainer without a scheduler."
    loader = data()
    t = make_trainer(seed=1)
    t.fit(loader, 2)
    t.save_checkpoint(tmp_path / 'ck.pt', loader)
    return tmp_path / 'ck.pt'


def trained(loader, **kw):
    "A trainer that has its own history: one epoch, so that every part of its state differs from the checkpoint's."
    t = make_trainer(seed=2, **kw)
    t.fit(loader, 1)
    return t


CASES = {
    'two parameter groups': (dict(groups=2), "optimizer: 1 parameter group(s) in the checkpoint, 2 in this optimizer"),
    'a scheduler the checkpoint lacks': (dict(scheduler=lambda o: StepLR(o, 2)),
                                         "scheduler: the checkpoint was saved without a scheduler, but this trainer has one (StepLR)"),
    'optimizer state of other shapes': (dict(reverse=True),
                                        "the state 'exp_avg' of parameter 0 has shape (8, 2) in the checkpoint, but the "
                                        "parameter has shape (2,)"),
    'another optimizer class': (dict(opt=SGD), "optimizer: the checkpoint's optimizer is Adam, this trainer's is SGD"),
}


@pytest.mark.parametrize('case', CASES)
def test_a_checkpoint_that_does_not_fit_changes_nothing(checkpoint, case):
    kw, message = CASES[case]
    loader = data(seed=5)
    t = trained(loader, **kw)
    before = state(t, loader)
    with pytest.raises(ValueError, match='nothing was restored') as e:
        t.load_checkpoint(checkpoint, loader)
    assert message in str(e.value)
    assert state(t, loader) == before


def test_a_scheduler_in_the_checkpoint_but_not_in_the_trainer_is_refused(tmp_path):
    loader = data()
    source = make_trainer(seed=1, scheduler=lambda o: StepLR(o, 2))
    source.fit(loader, 2)
    source.save_checkpoint(tmp_path / 'sched.pt', loader)
    t = trained(loader)
    before = state(t, loader)
    with pytest.raises(ValueError, match=r"holds the state of a scheduler \(StepLR\), but this trainer has none"):
        t.load_checkpoint(tmp_path / 'sched.pt', loader)
    assert state(t, loader) == before
    other = trained(loader, scheduler=lambda o: ExponentialLR(o, 0.5))
    before = state(other, loader)
    with pytest.raises(ValueError, match="the checkpoint's scheduler is StepLR, this trainer's is ExponentialLR"):
        other.load_checkpoint(tmp_path / 'sched.pt', loader)
    assert state(other, loader) == before


def test_a_corrupt_random_state_is_found_before_anything_is_written(checkpoint, tmp_path):
    ck = load(checkpoint)
    ck['rng']['default'] = mytorch.zeros(5, dtype=mytorch.uint8)
    save(ck, tmp_path / 'bad-rng.pt')
    loader = data(seed=5)
    t = trained(loader)
    before = state(t, loader)
    with pytest.raises(ValueError, match="random state: the default generator"):
        t.load_checkpoint(tmp_path / 'bad-rng.pt', loader)
    assert state(t, loader) == before


def test_every_misfit_is_reported_at_once(checkpoint):
    loader = data(seed=5)
    t = trained(loader, groups=2, scheduler=lambda o: StepLR(o, 2))
    with pytest.raises(ValueError) as e: t.load_checkpoint(checkpoint, loader)
    assert "\n  optimizer: " in str(e.value) and "\n  scheduler: " in str(e.value)


def test_a_failure_while_writing_is_rolled_back(tmp_path):
    "A custom scheduler whose load_state_dict raises after the optimizer was written: the optimizer is put back."
    class Fragile:
        def __init__(self, opt): self.opt, self.calls = opt, 0
        def step(self): self.calls += 1
        def state_dict(self): return {'calls': self.calls}
        def load_state_dict(self, sd):       # fails on any state but its own, which the rollback gives it back
            if sd['calls'] != self.calls: raise RuntimeError("cannot restore this scheduler")
    loader = data()
    t = make_trainer(seed=1, scheduler=Fragile)
    t.fit(loader, 1)
    t.save_checkpoint(tmp_path / 'fragile.pt', loader)
    t.fit(loader, 3)
    before = state(t, loader)
    with warnings.catch_warnings():
        warnings.simplefilter('error')       # the rollback itself succeeds: no "could not put back" warning
        with pytest.raises(RuntimeError, match="cannot restore this scheduler"):
            t.load_checkpoint(tmp_path / 'fragile.pt', loader)
    assert state(t, loader) == before


def test_a_checkpoint_that_fits_still_resumes_to_the_bit(tmp_path):
    loader = data()
    straight = make_trainer(seed=1, scheduler=lambda o: StepLR(o, 1, gamma=0.5))
    straight.fit(loader, 4)
    first = make_trainer(seed=1, scheduler=lambda o: StepLR(o, 1, gamma=0.5))
    first.fit(data(), 2, checkpoint=tmp_path / 'ck.pt')
    resumed = make_trainer(seed=9, scheduler=lambda o: StepLR(o, 1, gamma=0.5))
    resumed.fit(data(seed=3), 4, checkpoint=tmp_path / 'ck.pt', resume=True)
    assert (resumed.epoch, resumed.step, resumed.history['train_loss']) == (4, 16, straight.history['train_loss'])
    for p, q in zip(straight.model.parameters(), resumed.model.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    assert resumed.optimizer.param_groups[0]['lr'] == straight.optimizer.param_groups[0]['lr'] == 0.01 / 16


# ---------------------------------------------------------------------------------------------------------------------
# Run records: a crash in fit, and the O(1) log

def test_a_crash_in_fit_ends_a_run_that_is_not_in_a_with_block(tmp_path):
    loader = data()
    x, y = next(iter(loader))
    x = x.clone()
    x[3, 0] = float('nan')
    run = Run(tmp_path / 'run')
    t = make_trainer()
    with pytest.raises(FloatingPointError):
        t.fit([(x, y)], 2, run=run)
    record = Run.load(tmp_path / 'run')
    assert record.status == 'crashed' and record.ended is not None
    assert record.error['type'] == 'FloatingPointError' and 'the loss is nan' in record.error['message']
    assert signal.getsignal(signal.SIGTERM) is not None and type(signal.getsignal(signal.SIGTERM)).__name__ != '_StopHandler'


def bytes_written():
    return int(dict(l.split(': ') for l in Path('/proc/self/io').read_text().splitlines())['wchar'])


@pytest.mark.skipif(not Path('/proc/self/io').exists(), reason="needs Linux's /proc/self/io")
def test_a_log_call_writes_one_entry_not_the_whole_record(tmp_path):
    "Bytes handed to write() per log call, at the start and after 3,000 entries: the same (an entry), not growing."
    run = Run(tmp_path / 'run', fsync=False)
    def per_call(n=100):
        b0 = bytes_written()
        for i in range(n): run.log(loss=0.5, accuracy=0.25)
        return (bytes_written() - b0) / n
    first = per_call()
    for _ in range(30): per_call()
    later = per_call()
    run.finish()
    entry = len(json.dumps({'step': 3199, 'elapsed_s': 123.4567, 'loss': 0.5, 'accuracy': 0.25})) + 1   # the longest
    assert first < 2 * entry and later < 2 * entry, (first, later, entry)
    assert len(Run.load(tmp_path / 'run').metrics) == 3200


def test_logging_leaves_the_header_alone(tmp_path):
    "run.json is replaced when the run starts and when it ends, never by log."
    run = Run(tmp_path / 'run')
    inode, header = os.stat(run.path).st_ino, run.path.read_bytes()
    for i in range(20): run.log(loss=float(i))
    run.flush()
    assert (os.stat(run.path).st_ino, run.path.read_bytes()) == (inode, header)
    run.finish()
    assert os.stat(run.path).st_ino != inode
    assert Run.load(tmp_path / 'run').status == 'finished'


def test_a_torn_last_line_is_left_out_and_the_rest_kept(tmp_path):
    with Run(tmp_path / 'run') as run:
        for i in range(5): run.log(loss=float(i))
    with open(tmp_path / 'run' / 'metrics.jsonl', 'ab') as f: f.write(b'{"step": 5, "elapsed_s": 0.01, "loss": 5.')
    assert [e['loss'] for e in Run.load(tmp_path / 'run').metrics] == [0.0, 1.0, 2.0, 3.0, 4.0]
    # a broken line that is not the last cannot come from a crash: refused, naming it
    raw = (tmp_path / 'run' / 'metrics.jsonl').read_bytes().split(b'\n')
    raw[1] = raw[1][:10]
    (tmp_path / 'run' / 'metrics.jsonl').write_bytes(b'\n'.join(raw))
    with pytest.raises(ValueError, match="line 2 of"):
        Run.load(tmp_path / 'run')


# ---------------------------------------------------------------------------------------------------------------------
# Signal handlers in this process (pytest runs tests in the main thread)

@pytest.fixture
def sigterm_handler():
    "A Python SIGTERM handler that counts, installed for the test and removed after it."
    calls = []
    def counting(signum, frame): calls.append(signum)
    old = signal.signal(signal.SIGTERM, counting)
    yield counting, calls
    signal.signal(signal.SIGTERM, old)


def deliver(signum):
    "Send `signum` to this process and let Python run its handler."
    os.kill(os.getpid(), signum)
    for _ in range(100):     # the handler runs at the next bytecode boundary of the main thread
        time.sleep(0.001)


@posix_only
def test_the_handler_is_installed_while_the_run_is_live_and_the_previous_one_put_back(tmp_path, sigterm_handler):
    counting, calls = sigterm_handler
    hup = signal.getsignal(signal.SIGHUP)
    run = Run(tmp_path / 'run')
    assert signal.getsignal(signal.SIGTERM) is not counting
    run.finish()
    assert signal.getsignal(signal.SIGTERM) is counting and signal.getsignal(signal.SIGHUP) == hup
    with Run(tmp_path / 'run2'): pass
    assert signal.getsignal(signal.SIGTERM) is counting
    Run(tmp_path / 'run3', catch_signals=False)
    assert signal.getsignal(signal.SIGTERM) is counting


@posix_only
def test_sigterm_is_recorded_then_passed_to_the_previous_handler(tmp_path, sigterm_handler):
    counting, calls = sigterm_handler
    run = Run(tmp_path / 'run')
    run.log(loss=1.0)
    deliver(signal.SIGTERM)
    assert calls == [signal.SIGTERM]
    record = Run.load(tmp_path / 'run')
    assert (record.status, record.error['signal'], record.error['number']) == ('terminated', 'SIGTERM', 15)
    assert len(record.metrics) == 1 and record.ended is not None
    assert signal.getsignal(signal.SIGTERM) is counting
    with pytest.raises(RuntimeError, match=r"has ended \(terminated\)"): run.log(loss=2.0)


@posix_only
def test_nested_runs_each_record_the_signal(tmp_path, sigterm_handler):
    counting, calls = sigterm_handler
    outer, inner = Run(tmp_path / 'outer'), Run(tmp_path / 'inner')
    deliver(signal.SIGTERM)
    assert calls == [signal.SIGTERM]
    assert Run.load(tmp_path / 'outer').status == Run.load(tmp_path / 'inner').status == 'terminated'
    assert signal.getsignal(signal.SIGTERM) is counting


@posix_only
def test_a_finished_run_whose_handler_was_replaced_passes_signals_on(tmp_path, sigterm_handler):
    "Someone installs their handler over the run's, chaining to it; the run ends; a signal still reaches the first."
    counting, calls = sigterm_handler
    run = Run(tmp_path / 'run')
    ours = signal.getsignal(signal.SIGTERM)
    later = []
    signal.signal(signal.SIGTERM, lambda s, f: (later.append(s), ours(s, f)))
    run.finish()                       # cannot take its handler out of the chain; it becomes a pass-through
    deliver(signal.SIGTERM)
    assert later == calls == [signal.SIGTERM]
    assert Run.load(tmp_path / 'run').status == 'finished'


@posix_only
def test_a_signal_during_a_write_is_handled_when_the_write_ends(tmp_path, sigterm_handler):
    counting, calls = sigterm_handler
    run = Run(tmp_path / 'run')
    run._busy = True                  # as if SIGTERM came in the middle of a log call
    deliver(signal.SIGTERM)
    assert run.status == 'running' and calls == []
    run.log(loss=1.0)                 # the write ends, and the signal is handled
    assert run.status == 'terminated' and calls == [signal.SIGTERM]
    assert len(Run.load(tmp_path / 'run').metrics) == 1


@posix_only
def test_an_ignored_signal_stays_ignored(tmp_path):
    old = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        run = Run(tmp_path / 'run')
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        run.finish()
    finally: signal.signal(signal.SIGTERM, old)


def test_a_run_outside_the_main_thread_says_it_cannot_catch_signals(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        t = threading.Thread(target=lambda: Run(tmp_path / 'run').finish())
        t.start(); t.join(WAIT_S)
    assert any('outside the main thread' in str(x.message) for x in w)
    assert signal.getsignal(signal.SIGTERM) is before
    assert Run.load(tmp_path / 'run').status == 'finished'


# ---------------------------------------------------------------------------------------------------------------------
# Real child processes, real signals

def start(tmp_path, body:str):
    "Run `body` in a fresh interpreter that imports this checkout's mytorch; stdout is a pipe."
    script = tmp_path / 'child.py'
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def wait_for(proc, word:str, timeout=WAIT_S) -> str:
    "Read the child's stdout until a line equal to `word`, for at most `timeout` seconds."
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline, seen = time.monotonic() + timeout, b''
    try:
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())): continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk: break
            seen += chunk
            if word.encode() + b'\n' in seen: return seen.decode()
    finally: sel.close()
    proc.kill()
    _, err = proc.communicate(timeout=WAIT_S)
    pytest.fail(f"the child did not print {word!r} within {timeout}s; stdout {seen!r}, stderr {err.decode()[-2000:]}")


def ended(proc) -> int:
    try: return proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill(); proc.wait(timeout=WAIT_S)
        pytest.fail(f"the child was still running {WAIT_S}s after the signal")


@posix_only
@pytest.mark.parametrize('signame', ['SIGTERM', 'SIGHUP'])
def test_a_signal_ends_the_process_with_its_status_and_the_record_says_so(tmp_path, signame):
    proc = start(tmp_path, f"""
        import time
        from mytorch.training import Run
        with Run({str(tmp_path / 'run')!r}, config={{'epochs': 100}}) as run:
            for step in range(10**6):
                run.log(loss=1.0 / (step + 1))
                if step == 2: print('ready', flush=True)
                time.sleep(0.005)
        print('after the with block', flush=True)   # never reached: the signal ends the process
        """)
    wait_for(proc, 'ready')
    proc.send_signal(getattr(signal, signame))
    assert ended(proc) == -getattr(signal, signame)
    assert b'after the with block' not in proc.stdout.read()
    record = Run.load(tmp_path / 'run')
    assert (record.status, record.error['signal'], record.error['number']) == ('terminated', signame, getattr(signal, signame))
    assert record.ended is not None and len(record.metrics) >= 3
    assert 'child.py' in record.error['traceback']


@posix_only
def test_sigterm_during_trainer_fit_without_a_with_block(tmp_path):
    "The case of a training script stopped by its scheduler: the record says terminated, the exit status is -15."
    proc = start(tmp_path, f"""
        import mytorch, mytorch.nn as nn
        from mytorch.optim import SGD
        from mytorch.training import Run, Trainer
        from mytorch.utils.data import DataLoader, TensorDataset
        x = mytorch.randn(256, 4); y = (x.sum(1) > 0).long()
        loader = DataLoader(TensorDataset(x, y), batch_size=8)
        model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
        calls = [0]
        def loss_fn(out, target):
            calls[0] += 1
            if calls[0] == 40: print('ready', flush=True)
            return nn.functional.cross_entropy(out, target)
        run = Run({str(tmp_path / 'run')!r}, save_every=7)
        Trainer(model, loss_fn, SGD(model.parameters(), lr=0.1)).fit(loader, 10**6, run=run)
        """)
    wait_for(proc, 'ready')
    proc.terminate()
    assert ended(proc) == -signal.SIGTERM
    record = Run.load(tmp_path / 'run')
    assert record.status == 'terminated' and record.error['signal'] == 'SIGTERM'
    assert len(record.metrics) >= 39                    # the pending entries (save_every=7) were written too
    assert [e['step'] for e in record.metrics if 'loss' in e][:3] == [1, 2, 3]


@posix_only
def test_a_python_handler_installed_before_the_run_still_runs(tmp_path):
    proc = start(tmp_path, f"""
        import signal, sys, time
        from mytorch.training import Run
        def mine(signum, frame):
            print('mine', signum, flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, mine)
        with Run({str(tmp_path / 'run')!r}) as run:
            run.log(loss=1.0)
            print('ready', flush=True)
            while True: time.sleep(0.01)
        """)
    wait_for(proc, 'ready')
    proc.terminate()
    assert ended(proc) == 3
    assert b'mine 15' in proc.stdout.read()
    record = Run.load(tmp_path / 'run')
    assert record.status == 'terminated' and record.error['number'] == 15   # not 'crashed' by the SystemExit after it


@posix_only
def test_a_process_that_ignores_sigterm_keeps_running_and_finishes(tmp_path):
    proc = start(tmp_path, f"""
        import signal, sys, time
        from mytorch.training import Run
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with Run({str(tmp_path / 'run')!r}) as run:
            print('ready', flush=True)
            time.sleep(0.5)
            run.log(loss=1.0)
        print('done', flush=True)
        """)
    wait_for(proc, 'ready')
    proc.terminate()
    assert ended(proc) == 0
    assert b'done' in proc.stdout.read()
    assert Run.load(tmp_path / 'run').status == 'finished'


@posix_only
def test_a_forked_child_passes_the_signal_on_without_touching_the_record(tmp_path):
    "A DataLoader worker forked during a run inherits the handler: SIGTERM to it must not end the parent's record."
    proc = start(tmp_path, f"""
        import os, signal, time
        from mytorch.training import Run
        run = Run({str(tmp_path / 'run')!r})
        run.log(loss=1.0)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, b'x')     # (a signal that came before the child's interpreter set itself up would be lost)
            time.sleep(30)
            os._exit(0)
        os.read(r, 1)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        print('child', os.WTERMSIG(status) if os.WIFSIGNALED(status) else 'exited', flush=True)
        run.log(loss=2.0)
        run.finish()
        """)
    assert ended(proc) == 0
    assert b'child 15' in proc.stdout.read()
    record = Run.load(tmp_path / 'run')
    assert record.status == 'finished' and len(record.metrics) == 2


@posix_only
def test_a_reader_sees_a_complete_record_while_the_run_writes_and_after_it_is_killed(tmp_path):
    "Run.load in this process while a child logs as fast as it can, then SIGKILL: every read parses."
    proc = start(tmp_path, f"""
        from mytorch.training import Run
        run = Run({str(tmp_path / 'run')!r}, fsync=False)
        print('ready', flush=True)
        for step in range(10**7): run.log(loss=1.0 / (step + 1), note='x' * (step % 50))
        """)
    wait_for(proc, 'ready')
    counts, deadline = [], time.monotonic() + 1.0
    while time.monotonic() < deadline: counts.append(len(Run.load(tmp_path / 'run').metrics))
    proc.kill()
    ended(proc)
    final = Run.load(tmp_path / 'run')
    assert counts == sorted(counts) and counts[-1] > 0
    assert final.status == 'running' and len(final.metrics) >= counts[-1]
    assert [e['step'] for e in final.metrics] == list(range(len(final.metrics)))
