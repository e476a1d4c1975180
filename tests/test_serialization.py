"""Adversarial tests of mytorch.save / mytorch.load (nbs/35_serialization.ipynb).

The property under test: whatever happens to a file (cut short at any byte, bits flipped anywhere, members
edited with valid zip checksums, a writer killed mid-write, readers racing a writer), `load` either returns
exactly what was saved or raises SerializationError. It never returns other numbers, never raises some other
exception from deep inside zipfile or NumPy, and never runs code from the file.
"""
import hashlib
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import mytorch
from mytorch.engine import Tensor
from mytorch.serialization import SerializationError, atomic_write, load, save


def make_checkpoint(seed=0, n=6):
    "A small checkpoint: a state dict with a tied weight and an int buffer, optimizer-like state, a history."
    g = mytorch.Generator().manual_seed(seed)
    w = mytorch.randn(n, 3, generator=g)
    model = OrderedDict([('w1', w), ('b1', mytorch.randn(n, generator=g)), ('w2', w.detach()),
                         ('steps', mytorch.tensor(7))])
    opt = {'state': {0: {'step': mytorch.tensor(2.0), 'exp_avg': mytorch.randn(n, 3, generator=g, dtype=mytorch.float64)}},
           'param_groups': [{'params': [0, 1], 'lr': 0.01, 'betas': (0.9, 0.999), 'amsgrad': False, 'foreach': None}]}
    return {'epoch': 3, 'model': model, 'optimizer': opt, 'history': [0.5, float('nan'), float('inf')], 'name': 'run'}


def canonical(o):
    "A nested structure in comparable form: tensors and arrays as (kind, dtype, shape, bytes); key types kept."
    if isinstance(o, Tensor): return ('tensor', o.dtype.str, o.shape, o._data.tobytes(), o.requires_grad)
    if isinstance(o, np.ndarray): return ('ndarray', o.dtype.str, o.shape, o.tobytes())
    if isinstance(o, dict): return (type(o).__name__, [(type(k).__name__, k, canonical(v)) for k, v in o.items()])
    if isinstance(o, (list, tuple)): return (type(o).__name__, [canonical(v) for v in o])
    if isinstance(o, float): return ('float', o.hex())
    return (type(o).__name__, o)


@pytest.fixture
def saved(tmp_path):
    "(path, bytes, canonical form) of a saved checkpoint."
    path = tmp_path / 'ckpt.pt'
    obj = make_checkpoint()
    save(obj, path)
    return path, path.read_bytes(), canonical(obj)


def outcome(data, path=None):
    """What load makes of `data` (read from memory, or from `path` after writing it there): the loaded object, or
    'refused' on SerializationError. Any other exception fails the test."""
    if path is not None: path.write_bytes(data)
    try: result = load(io.BytesIO(data) if path is None else path)
    except SerializationError as e:
        label = '<BytesIO>' if path is None else repr(str(path))
        assert str(e).startswith(f"mytorch.load({label}): "), str(e)
        return 'refused'
    return result


def test_round_trip(saved):
    path, _, expected = saved
    assert canonical(load(path)) == expected


def test_every_truncation_is_refused(saved, tmp_path):
    path, data, _ = saved
    for n in range(len(data)):
        assert outcome(data[:n]) == 'refused', f"truncated to {n} of {len(data)} bytes loaded"
    for n in (0, 10, len(data) // 2, len(data) - 1):   # and from a file on disk
        assert outcome(data[:n], tmp_path / 'cut.pt') == 'refused', n


def test_truncation_of_a_large_file_at_random_offsets(tmp_path):
    "A file bigger than zipfile's 64 KiB search window for the end record, cut at random offsets."
    path = tmp_path / 'big.pt'
    save({'w': mytorch.randn(300, 300, generator=mytorch.Generator().manual_seed(1))}, path)
    data = path.read_bytes()
    rng = np.random.default_rng(0)
    for n in sorted(set(rng.integers(0, len(data), 150).tolist()) | {len(data) - 1, len(data) - 22, len(data) - 23}):
        assert outcome(data[:n]) == 'refused', n


def test_every_single_bit_flip_is_refused_or_harmless(saved, tmp_path):
    """One bit flipped in each byte in turn. Flips in zip metadata that no reader uses (timestamps, 'version made
    by', attributes) are allowed to load, but only to exactly the saved values."""
    path, data, expected = saved
    rng = np.random.default_rng(1)
    harmless = 0
    for i in range(len(data)):
        flipped = data[:i] + bytes([data[i] ^ (1 << int(rng.integers(8)))]) + data[i + 1:]
        result = outcome(flipped)
        if result != 'refused':
            assert canonical(result) == expected, f"a bit flip at byte {i} loaded different values"
            harmless += 1
    assert harmless < len(data) // 10, harmless


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_overwrites_are_refused_or_harmless(saved, tmp_path, data):
    path, good, expected = saved
    start = data.draw(st.integers(0, len(good) - 1))
    junk = data.draw(st.binary(min_size=1, max_size=64))
    corrupted = (good[:start] + junk + good[start + len(junk):])[:len(good)]
    result = outcome(corrupted)
    if result != 'refused': assert canonical(result) == expected


def rezip(data, edit):
    "The archive rebuilt with `edit(name, bytes) -> bytes` applied to each member; zipfile writes fresh CRC-32s."
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, 'w') as dst:
        for name in src.namelist(): dst.writestr(name, edit(name, src.read(name)))
    return out.getvalue()


def test_array_bytes_changed_with_a_valid_crc_are_refused(saved, tmp_path):
    "Every byte of every array member changed in turn, CRC recomputed: only the SHA-256 stands between the edit and the reader."
    path, data, _ = saved
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if n.endswith('.npy')}
    checked = 0
    for name, raw in members.items():
        for i in range(0, len(raw), 3):
            edited = rezip(data, lambda n, b: b[:i] + bytes([b[i] ^ 0x20]) + b[i + 1:] if n == name else b)
            assert outcome(edited) == 'refused', (name, i)
            checked += 1
    assert checked > 100


def test_manifest_edits_with_a_valid_crc_are_refused(saved, tmp_path):
    path, data, _ = saved
    def manifest_edit(f):
        return rezip(data, lambda n, b: json.dumps(f(json.loads(b))).encode() if n == 'manifest.json' else b)
    def entry(i, **kw):
        def f(m): m['arrays'][i].update(kw); return m
        return f
    edits = [entry(0, dtype='<f8'), entry(0, dtype='|O'), entry(0, dtype='<U4'), entry(0, shape=[3, 6]),
             entry(0, shape=[18]), entry(1, sha256='0' * 64), entry(2, file='data/0.npy'),
             lambda m: {**m, 'arrays': m['arrays'][:-1]}, lambda m: {**m, 'version': 99},
             lambda m: {**m, 'root': {'tensor': 42, 'requires_grad': False}}]
    for f in edits: assert outcome(manifest_edit(f)) == 'refused', f


def write_payload_marker_pickle(marker):
    "Pickle bytes that create `marker` when unpickled."
    class Payload:
        def __reduce__(self): return (io.open, (str(marker), 'w'))
    return pickle.dumps(Payload())


def test_pickle_payloads_are_refused_without_running(saved, tmp_path):
    path, data, _ = saved
    marker = tmp_path / 'code-ran'
    payload = write_payload_marker_pickle(marker)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {'descr': '|O', 'fortran_order': False, 'shape': (1,)})
    member = header.getvalue() + payload
    sha = hashlib.sha256(member).hexdigest()
    def attack(dtype):
        def edit(n, b):
            if n == 'data/0.npy': return member
            if n == 'manifest.json':
                m = json.loads(b)
                m['arrays'][0].update(sha256=sha, dtype=dtype, shape=[1])
                return json.dumps(m).encode()
            return b
        return rezip(data, edit)
    for bad_bytes in (payload, attack('<f4'), attack('|O'), pickle.dumps({'w': np.zeros(3)})):
        assert outcome(bad_bytes, tmp_path / 'evil.pt') == 'refused'
        assert not marker.exists()
    # the control: the same payload does run under pickle
    pickle.loads(payload).close()
    assert marker.exists()


def test_torch_files_are_refused(tmp_path):
    torch = pytest.importorskip('torch')
    sd = torch.nn.Linear(2, 3).state_dict()
    torch.save(sd, tmp_path / 'zip.pt')
    torch.save(sd, tmp_path / 'legacy.pt', _use_new_zipfile_serialization=False)
    with pytest.raises(SerializationError, match="written by torch.save"): load(tmp_path / 'zip.pt')
    with pytest.raises(SerializationError, match="the file is a pickle"): load(tmp_path / 'legacy.pt')


def test_a_failed_replace_leaves_the_old_file(saved, monkeypatch):
    path, data, expected = saved
    def crash(src, dst): raise OSError("simulated crash between write and rename")
    monkeypatch.setattr(os, 'replace', crash)
    with pytest.raises(OSError, match="simulated crash"): save(make_checkpoint(seed=1), path)
    monkeypatch.undo()
    assert path.read_bytes() == data
    assert canonical(load(path)) == expected
    assert sorted(p.name for p in path.parent.iterdir()) == ['ckpt.pt']


def test_a_crash_while_writing_arrays_leaves_the_old_file(saved, monkeypatch):
    path, data, _ = saved
    real = np.lib.format.write_array
    calls = []
    def dies_on_third(fp, array, **kw):
        calls.append(1)
        if len(calls) == 3:
            fp.write(b'partial')
            raise MemoryError("simulated failure in the middle of the archive")
        return real(fp, array, **kw)
    monkeypatch.setattr(np.lib.format, 'write_array', dies_on_third)
    with pytest.raises(MemoryError): save(make_checkpoint(seed=1), path)
    monkeypatch.undo()
    assert path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == ['ckpt.pt']


def test_an_unsavable_object_never_touches_the_disk(saved):
    path, data, _ = saved
    with pytest.raises(TypeError, match=r"at obj\['model'\]\['f'\]"): save({'model': {'f': print}}, path)
    assert path.read_bytes() == data


WRITER = textwrap.dedent("""
    import sys, time
    import mytorch
    from mytorch.serialization import save
    path, seconds = sys.argv[1], float(sys.argv[2])
    states = [{'w': mytorch.full((256, 256), float(v)), 'v': v} for v in (1, 2)]
    print('ready', flush=True)
    end, i = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        save(states[i % 2], path); i += 1
    print(i, flush=True)
""")


def start_writer(path, seconds):
    proc = subprocess.Popen([sys.executable, '-c', WRITER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == 'ready'
    return proc


def check_state(obj):
    "The object is one of the writer's two states, complete."
    v = obj['v']
    assert v in (1, 2) and obj['w'].shape == (256, 256)
    assert np.all(obj['w'].numpy() == float(v)), "a reader saw a mixture of two states"
    return v


def test_concurrent_readers_see_old_or_new(tmp_path):
    path = tmp_path / 'shared.pt'
    save({'w': mytorch.full((256, 256), 1.0), 'v': 1}, path)
    writer = start_writer(path, 2.0)
    seen, loads = set(), 0
    try:
        while writer.poll() is None:
            seen.add(check_state(load(path)))
            loads += 1
    finally:
        writer.wait(timeout=30)
    writes = int(writer.stdout.read().strip())
    assert writer.returncode == 0
    assert loads > 10 and writes > 10, (loads, writes)
    assert seen == {1, 2}, seen


def test_a_killed_writer_leaves_a_loadable_file(tmp_path):
    "SIGKILL at random moments: the target always loads as a complete state; only stray .tmp files may remain."
    if not hasattr(signal, 'SIGKILL'): pytest.skip("no SIGKILL on this platform")
    path = tmp_path / 'killed.pt'
    save({'w': mytorch.full((256, 256), 1.0), 'v': 1}, path)
    rng = np.random.default_rng(2)
    for _ in range(5):
        writer = start_writer(path, 30.0)
        time.sleep(float(rng.uniform(0.05, 0.3)))
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        check_state(load(path))
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != 'killed.pt']
    assert all(n.startswith('.killed.pt.') and n.endswith('.tmp') for n in leftovers), leftovers


def test_atomic_write_text_mode_and_failure(tmp_path):
    path = tmp_path / 'run.json'
    with atomic_write(path, 'w') as f: f.write('{"ok": true}')
    assert path.read_text() == '{"ok": true}'
    with pytest.raises(ZeroDivisionError):
        with atomic_write(path, 'w') as f:
            f.write('{"ok": fal')
            1 / 0
    assert path.read_text() == '{"ok": true}'
    assert [p.name for p in tmp_path.iterdir()] == ['run.json']
