"""Recurrent layers, forward and backward, against PyTorch on the CPU: one thread, float64, one run.

Each layer has input 32, hidden 64, 20 steps and batch 16, and runs each direction as one fused
op (`LSTMSequence`, `GRUSequence`, `RNNSequence`). Below each fused row, the same layer run as a
loop over its cell (`lstm_cell`, `gru_cell`, `rnn_tanh_cell`: the Part II ops the fused op
replaces) is kept for the record of what fusing bought. Each step is one forward pass and one
backward pass from the output and the final states; the best time of many runs is kept, mytorch
and PyTorch measured alternately so that both see the same machine load. The header says which
implementation of the LSTM's gate kernels ran (`lstm_gates`, `lstm_gates_backward`);
`MYTORCH_KERNELS=numpy` runs their NumPy references instead (the GRU's and the RNN's fused ops
are NumPy alone):

    .venv/bin/python benchmarks/lstm.py
    MYTORCH_KERNELS=numpy .venv/bin/python benchmarks/lstm.py
"""
import os
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"
import argparse
import functools
import timeit

import numpy as np
import mytorch
import mytorch.autograd
from mytorch.kernels import kernel_backend
from mytorch.nn.recurrent import LSTM, GRU, RNN, RNNBase

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None

SEQ, BATCH, INPUT, HIDDEN = 20, 16, 32, 64


class LoopLSTM(LSTM):
    "The LSTM layer run step by step through lstm_cell (the chapter's reference), instead of LSTMSequence."
    _direction = RNNBase._direction


class LoopGRU(GRU):
    "The GRU layer run step by step through gru_cell, instead of GRUSequence."
    _direction = RNNBase._direction


class LoopRNN(RNN):
    "The Elman RNN layer run step by step through rnn_tanh_cell or rnn_relu_cell, instead of RNNSequence."
    _direction = RNNBase._direction


def step_fn(lib, cls, x, up_out, up_state):
    "A function doing one forward and backward pass of a one-layer `cls` of `lib` on `x`."
    m = cls(INPUT, HIDDEN, dtype=lib.float64)
    xt = lib.tensor(x)
    g_out = lib.tensor(up_out)
    g_state = lib.tensor(up_state)
    def step():
        out, state = m(xt)
        states = state if isinstance(state, tuple) else (state,)
        lib.autograd.backward([out, *states], [g_out] + [g_state] * len(states))
    return step


def best_ms(fns, repeat, number):
    "Best time per call of each function, in ms, timing them in turn `repeat` times."
    for f in fns: f()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for k, f in enumerate(fns): times[k].append(timeit.timeit(f, number=number) / number)
    return [min(t) * 1e3 for t in times]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--number", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SEQ, BATCH, INPUT))
    up_out, up_state = rng.standard_normal((SEQ, BATCH, HIDDEN)), rng.standard_normal((1, BATCH, HIDDEN))
    mytorch.manual_seed(0)
    if torch: torch.manual_seed(0)
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else 'not installed'}, 1 thread, float64; "
          f"input {INPUT}, hidden {HIDDEN}, {SEQ} steps, batch {BATCH}; forward + backward, best of "
          f"{args.repeat} x {args.number}")
    print(f"kernels: lstm_gates {kernel_backend('lstm_gates')}, lstm_gates_backward "
          f"{kernel_backend('lstm_gates_backward')}\n")
    print(f"{'layer':<48}{'mytorch ms':>12}{'torch ms':>10}{'ratio':>9}")
    relu = dict(nonlinearity="relu")
    rows = [("LSTM (fused LSTMSequence)", LSTM, "LSTM", {}),
            ("LSTM as an lstm_cell loop (reference)", LoopLSTM, "LSTM", {}),
            ("GRU (fused GRUSequence)", GRU, "GRU", {}),
            ("GRU as a gru_cell loop (reference)", LoopGRU, "GRU", {}),
            ("RNN tanh (fused RNNSequence)", RNN, "RNN", {}),
            ("RNN tanh as an rnn_tanh_cell loop (reference)", LoopRNN, "RNN", {}),
            ("RNN relu (fused RNNSequence)", RNN, "RNN", relu),
            ("RNN relu as an rnn_relu_cell loop (reference)", LoopRNN, "RNN", relu)]
    for label, ours, theirs, kw in rows:
        fns = [step_fn(mytorch, functools.partial(ours, **kw), x, up_out, up_state)]
        if torch: fns.append(step_fn(torch, functools.partial(getattr(torch.nn, theirs), **kw), x, up_out, up_state))
        ms = best_ms(fns, args.repeat, args.number)
        t_ms = ms[1] if torch else float("nan")
        print(f"{label:<48}{ms[0]:>12.3f}{t_ms:>10.3f}{ms[0] / t_ms:>8.2f}x")
    print("\nratio: mytorch's time divided by PyTorch's (below 1.0 is faster).")


if __name__ == "__main__":
    main()
