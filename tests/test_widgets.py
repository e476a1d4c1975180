"""`mytorch.widgets`: the data OptimizerRace and ConvVisualizer build from MyTorch's numbers, the errors they raise,
and the widgets themselves, saved to disk and driven in headless Chromium from file://."""
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import OfflinePage

import mytorch
import mytorch.nn.functional as F
from mytorch import optim
from mytorch.nn.conv import ConvGeometry, conv_output_size, im2col
from mytorch.widgets import ConvVisualizer, OptimizerRace, contour_levels

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "widgets"
SIZE = 420  # the race's plot, in pixels (race.js)


# ---- data computed with MyTorch ---------------------------------------------------------------

def rosenbrock(x, y): return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2
def saddle(x, y): return x ** 2 - y ** 2 + y ** 4 / 4


def descend(name, lr, f, start, steps):
    "The path of optimizer `name` of OPTIMIZERS at `lr` on f from `start`, moving a float64 tensor of shape (2,)."
    cls, kw = OPTIMIZERS[name]
    p = mytorch.tensor(start, dtype=mytorch.float64, requires_grad=True)
    opt, path, losses = cls([p], lr=lr, **kw), [], []
    for t in range(steps + 1):
        loss = f(p[0], p[1])
        path.append(p.detach().numpy().copy()); losses.append(loss.item())
        if t == steps: break
        opt.zero_grad(); loss.backward(); opt.step()
    return np.array(path), np.array(losses)


OPTIMIZERS = {'SGD': (optim.SGD, {}), 'Momentum': (optim.SGD, dict(momentum=0.9)), 'Adam': (optim.Adam, {})}
TUNED = {'SGD': 1e-3, 'Momentum': 5e-4, 'Adam': 0.05}


def small_race(steps=30):
    "Three mytorch.optim optimizers on Rosenbrock (two runs, lrs per optimizer) and on a saddle (one run, one lr)."
    race = OptimizerRace('test race')
    race.add_surface('Rosenbrock', rosenbrock, (-2, 2), (-1, 3), n=25, log=True, minimum=(1, 1))
    race.add_surface('saddle', saddle, (-1.5, 1.5), (-2, 2), n=25)
    for scale, label in ((1, 'lr as tuned'), (2, 'lr ×2')):
        lrs = {name: lr * scale for name, lr in TUNED.items()}
        runs = {name: descend(name, lr, rosenbrock, (-1.5, 2.0), steps) for name, lr in lrs.items()}
        race.add_run('Rosenbrock', lrs, {n: r[0] for n, r in runs.items()}, {n: r[1] for n, r in runs.items()}, label=label)
    race.add_run('saddle', 0.01, {name: descend(name, 0.01, saddle, (-1.2, 0.01), steps)[0] for name in OPTIMIZERS})
    return race


def conv_case(x, w, stride, padding, dilation):
    "im2col's columns and conv2d's output for a single-channel (H, W) input and (kh, kw) kernel."
    (H, W), (kh, kw) = x.shape, w.shape
    out = tuple(conv_output_size(n, k, stride, dilation, padding, padding) for n, k in zip((H, W), (kh, kw)))
    geom = ConvGeometry((H, W), out, (kh, kw), (stride,) * 2, (dilation,) * 2, (padding,) * 2, 1)
    cols = im2col(x[None, None], geom)
    y = F.conv2d(mytorch.tensor(x[None, None]), mytorch.tensor(w[None, None]), stride=stride, padding=padding,
                 dilation=dilation)
    return cols, y


CASES = [(1, 0, 1), (1, 1, 1), (2, 1, 1), (1, 0, 2)]


def small_conv():
    x = np.add.outer(np.arange(5.0), np.arange(5.0) * 2) % 5
    w = np.array([[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]])
    viz = ConvVisualizer(x, w, 'test conv')
    for s, p, d in CASES: viz.add_case(*conv_case(x, w, s, p, d), stride=s, padding=p, dilation=d)
    return viz, x, w


# ---- the race's data and errors -----------------------------------------------------------------

def test_race_data_layout():
    race = small_race()
    data = race.data
    assert [o['name'] for o in data['optimizers']] == list(OPTIMIZERS)
    assert len({o['color'] for o in data['optimizers']}) == len(OPTIMIZERS)
    rb, sd = data['surfaces']
    assert (rb['name'], rb['log'], rb['xlim'], rb['ylim'], rb['minimum']) == ('Rosenbrock', True, [-2, 2], [-1, 3], [1, 1])
    # z[i][j] = f(x_j, y_i): row i at y_i, x along the row
    z = np.array(rb['z'])
    assert z.shape == (25, 25)
    xs, ys = np.linspace(-2, 2, 25), np.linspace(-1, 3, 25)
    assert z[3, 20] == pytest.approx(rosenbrock(xs[20], ys[3]), rel=1e-3)
    levels = np.array(rb['levels'])
    assert len(levels) == 12 and (np.diff(levels) > 0).all() and 0 < levels[0] and levels[-1] < z.max()
    assert np.allclose(levels[1:] / levels[:-1], levels[1] / levels[0], rtol=1e-3)     # geometric
    assert [r['label'] for r in rb['runs']] == ['lr as tuned', 'lr ×2'] and [r['label'] for r in sd['runs']] == ['lr = 0.01']
    # the paths and losses are what mytorch.optim produced, to four significant digits
    adam = rb['runs'][1]['paths']['Adam']
    path, losses = descend('Adam', 0.1, rosenbrock, (-1.5, 2.0), 30)
    assert adam['lr'] == 0.1 and len(adam['x']) == len(adam['y']) == len(adam['loss']) == 31
    np.testing.assert_allclose(adam['x'], path[:, 0], rtol=1e-3)
    np.testing.assert_allclose(adam['loss'], losses, rtol=1e-3)
    assert all(float(f'{v:.4g}') == v for v in adam['x'] + adam['loss']) and adam['x'] != path[:, 0].tolist()
    # losses left out come from the surface's f along the path
    sgd = sd['runs'][0]['paths']['SGD']
    np.testing.assert_allclose(sgd['loss'], saddle(np.array(sgd['x']), np.array(sgd['y'])), rtol=2e-3, atol=1e-6)


def test_reprs():
    assert repr(small_race(3)) == "OptimizerRace('test race': 2 surfaces, 3 runs, optimizers ['SGD', 'Momentum', 'Adam'])"
    assert repr(small_conv()[0]).startswith("ConvVisualizer('test conv': input 5×5, kernel 3×3, cases ['stride 1, padding 0,")


def test_race_json_stays_small():
    "A race of three optimizers, two surfaces and three runs of 30 steps embeds a few tens of kilobytes."
    race = small_race()
    data = json.dumps(race.data, separators=(',', ':'))
    assert len(data) < 40_000, len(data)
    assert len(race.html()) < len(data) + 20_000


def test_contour_levels():
    z = np.array([[0.0, 1.0], [10.0, 1000.0]])
    np.testing.assert_allclose(contour_levels(z, 3), [250, 500, 750])
    lv = contour_levels(z, 3, log=True)
    assert (np.diff(np.log(lv)) == pytest.approx(np.log(lv[1] / lv[0]))) and lv[-1] < 1000


def test_race_errors():
    race = OptimizerRace()
    with pytest.raises(ValueError, match="no surfaces"): race.data
    race.add_surface('bowl', lambda x, y: x ** 2 + y ** 2, (-1, 1), (-1, 1), n=5)
    with pytest.raises(ValueError, match=r"surfaces without runs: \['bowl'\]"): race.data
    path = np.array([[0.5, 0.5], [0.25, 0.25], [0.1, 0.1]])
    with pytest.raises(KeyError, match="no surface named 'Beale'; the race has \\['bowl'\\]"):
        race.add_run('Beale', 0.1, {'gd': path})
    with pytest.raises(ValueError, match="'gd' has 3 points but 2 losses"):
        race.add_run('bowl', 0.1, {'gd': path}, losses={'gd': [0.5, 0.1]})
    with pytest.raises(KeyError, match="losses must be a dict with the same optimizers"):
        race.add_run('bowl', 0.1, {'gd': path}, losses={'adam': [0.5, 0.1, 0.0]})
    with pytest.raises(KeyError, match=r"missing: \['gd'\]; unknown: \['sgd'\]"):
        race.add_run('bowl', {'sgd': 0.1}, {'gd': path})
    with pytest.raises(ValueError, match="learning rate of 'gd' must be a positive finite number, got -0.1"):
        race.add_run('bowl', -0.1, {'gd': path})
    with pytest.raises(ValueError, match=r"shape \(2, 3\); a path is \(T\+1, 2\).*Transpose it"):
        race.add_run('bowl', 0.1, {'gd': path.T})
    with pytest.raises(ValueError, match=r"must have shape \(any, 2\), got shape \(3, 3\)"):
        race.add_run('bowl', 0.1, {'gd': np.ones((3, 3))})
    with pytest.raises(ValueError, match="the path of 'gd' leaves the finite numbers at step 2 .* path\\[:2\\]"):
        race.add_run('bowl', 0.1, {'gd': [[1, 1], [4, 4], [np.inf, 1]]})
    with pytest.raises(ValueError, match="the loss of 'gd' leaves the finite numbers at step 1"):
        race.add_run('bowl', 0.1, {'gd': path}, losses={'gd': [1.0, np.nan, 2.0]})
    with pytest.raises(TypeError, match="must be numbers"):
        race.add_run('bowl', 0.1, {'gd': [['a', 'b']]})
    with pytest.raises(TypeError, match="paths must be a non-empty dict"):
        race.add_run('bowl', 0.1, path)
    race.add_run('bowl', 0.1, {'gd': path})
    with pytest.raises(ValueError, match="already has a run labelled 'lr = 0.1'"):
        race.add_run('bowl', 0.1, {'gd': path})
    with pytest.raises(ValueError, match="already a surface named 'bowl'"):
        race.add_surface('bowl', lambda x, y: x, (-1, 1), (-1, 1))
    with pytest.raises(ValueError, match="xlim and ylim must be increasing"):
        race.add_surface('b2', lambda x, y: x, (1, -1), (-1, 1))
    with pytest.raises(ValueError, match=r"f on the 3×3 grid holds 3 non-finite value\(s\), the first inf at index \(0, 1\)"), \
            np.errstate(divide='ignore'):
        race.add_surface('b3', lambda x, y: 1 / x, (-1, 1), (-1, 1), n=3)
    with pytest.raises(ValueError, match=r"log-scaled contours need f >= 0, but f\(-1, -1\) = -2"):
        race.add_surface('b4', lambda x, y: x ** 2 - y ** 2 - 2 * x * y, (-1, 1), (-1, 1), n=3, log=True)
    with pytest.raises(ValueError, match="n must be an int from 3 to 201"):
        race.add_surface('b5', lambda x, y: x, (-1, 1), (-1, 1), n=1000)
    with pytest.raises(ValueError, match="levels must be increasing"):
        race.add_surface('b6', lambda x, y: x, (-1, 1), (-1, 1), levels=[0.5, 0.2])
    with pytest.raises(TypeError, match="f must be a function"):
        race.add_surface('b7', np.ones((3, 3)), (-1, 1), (-1, 1))
    # a failed add_run leaves the race as it was
    assert list(race.surfaces['bowl']['runs']) == ['lr = 0.1'] and list(race.colors) == ['gd']


def test_race_accepts_tensors_and_paths_of_different_lengths():
    race = OptimizerRace()
    race.add_surface('bowl', lambda x, y: x ** 2 + y ** 2, (-1, 1), (-1, 1), n=5)
    long = mytorch.tensor([[0.5, 0.5], [0.25, 0.25], [0.1, 0.1]], requires_grad=True)
    race.add_run('bowl', 0.1, {'long': long, 'stopped': [[0.5, -0.5]]})
    paths = race.data['surfaces'][0]['runs'][0]['paths']
    assert (paths['long']['x'], paths['stopped']['loss']) == ([0.5, 0.25, 0.1], [0.5])


# ---- the visualizer's data and errors -----------------------------------------------------------

def test_conv_data_layout():
    viz, x, w = small_conv()
    data = viz.data
    assert (data['input'], data['kernel']) == (x.astype(int).tolist(), w.astype(int).tolist())
    assert [c['label'] for c in data['cases']] == ['stride 1, padding 0, dilation 1', 'stride 1, padding 1, dilation 1',
                                                   'stride 2, padding 1, dilation 1', 'stride 1, padding 0, dilation 2']
    for c, (s, p, d) in zip(data['cases'], CASES):
        assert (c['stride'], c['padding'], c['dilation']) == ([s, s], [p, p], [d, d])
        ho = conv_output_size(5, 3, s, d, p, p)
        cols, y = np.array(c['columns']), np.array(c['output'])
        assert cols.shape == (9, ho * ho) and y.shape == (ho, ho)
        np.testing.assert_allclose(w.ravel() @ cols, y.ravel())
    # column l = p*Wo + q holds the window of output (p, q); row k = i*kw + j its tap (i, j)
    cols = np.array(data['cases'][2]['columns'])      # stride 2, padding 1: 3×3 windows
    xp = np.pad(x, 1)
    assert cols[:, 1 * 3 + 2].tolist() == xp[2:5, 4:7].ravel().tolist()
    dil = np.array(data['cases'][3]['columns'])       # dilation 2: taps two apart, one 1×1 output
    assert dil[:, 0].tolist() == x[::2, ::2].ravel().tolist()


def test_conv_errors():
    viz, x, w = small_conv()
    cols, y = conv_case(x, w, 1, 1, 1)
    flat = cols.reshape(9, 25)
    with pytest.raises(ValueError, match="That is the transpose"):
        viz.add_case(flat.T, y, padding=1, label='t')
    with pytest.raises(ValueError, match=r"columns must be \(9, 9\)"):
        viz.add_case(cols, y, stride=2, padding=1, label='s')
    with pytest.raises(ValueError, match=r"column 0 \(output \(0, 0\)\) is .* but that window of the padded input is"):
        viz.add_case(np.roll(flat, 1, axis=1), y, padding=1, label='r')
    with pytest.raises(ValueError, match=r"output \(0, 0\) is .* convolution without bias"):
        viz.add_case(cols, y.detach().numpy() + 1, padding=1, label='b')
    with pytest.raises(ValueError, match=r"output must be \(5, 5\)"):
        viz.add_case(cols, np.zeros((4, 4)), padding=1, label='o')
    with pytest.raises(ValueError, match="there is no window"):
        viz.add_case(cols, y, dilation=3)
    with pytest.raises(ValueError, match="stride must be an int or a pair of ints, each at least 1, got 0"):
        viz.add_case(cols, y, stride=0)
    with pytest.raises(ValueError, match="padding must be an int or a pair"):
        viz.add_case(cols, y, padding=True)
    with pytest.raises(ValueError, match="already a case labelled 'stride 1, padding 1, dilation 1'"):
        viz.add_case(cols, y, padding=1)
    with pytest.raises(ValueError, match="non-finite"):
        viz.add_case(np.where(flat == flat.max(), np.nan, flat), y, padding=1, label='n')
    with pytest.raises(ValueError, match="up to 12×12"):
        ConvVisualizer(np.zeros((13, 4)), w)
    with pytest.raises(ValueError, match=r"must have shape \(any, any\)"):
        ConvVisualizer(np.zeros((1, 4, 4)), w)
    with pytest.raises(ValueError, match="no cases"):
        ConvVisualizer(x, w).data


# ---- in the browser ---------------------------------------------------------------------------

class Page(OfflinePage):
    "A saved widget's page, with screenshots for a person to look at."
    def shot(self, name):
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=SHOTS / f"{name}.png", full_page=True)


def slide(locator, value):
    "Move a range input as a reader's drag does: set the value, fire `input`."
    locator.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }", str(value))


def markers(root):
    "{optimizer: (cx, cy)} of the race's current markers."
    return {m.get_attribute('data-optimizer'): (float(m.get_attribute('cx')), float(m.get_attribute('cy')))
            for m in root.locator('circle.mt-marker').all()}


def to_px(surface, x, y):
    (x0, x1), (y0, y1) = surface['xlim'], surface['ylim']
    return (x - x0) / (x1 - x0) * SIZE, SIZE - (y - y0) / (y1 - y0) * SIZE


@pytest.mark.browser
def test_race_in_browser(open_page, tmp_path):
    race = small_race()
    data = race.data
    v = open_page(race.save(tmp_path / 'race.html'), Page)
    root = v.page.locator('.mytorch-race')
    assert root.get_attribute('data-step') == '0' and root.get_attribute('data-surface') == 'Rosenbrock'
    assert root.get_attribute('data-run') == 'lr as tuned'
    assert root.locator('.mt-contours path[data-level]').count() == 12
    assert all(len(d) > 20 for d in root.locator('.mt-contours path[data-level]').evaluate_all("ps => ps.map(p => p.getAttribute('d'))"))
    assert root.locator('.mt-legend li').all_inner_texts()[0].startswith('SGD')
    rb = data['surfaces'][0]
    start = markers(root)
    for name, (cx, cy) in start.items():
        assert (cx, cy) == pytest.approx(to_px(rb, -1.5, 2.0), abs=0.11)
    v.shot('race-start')

    # the slider moves every optimizer to that step: markers, polylines, losses
    slide(root.locator('input.mt-step'), 17)
    assert root.get_attribute('data-step') == '17'
    run = rb['runs'][0]['paths']
    for name, (cx, cy) in markers(root).items():
        assert (cx, cy) == pytest.approx(to_px(rb, run[name]['x'][17], run[name]['y'][17]), abs=0.11)
        assert root.locator(f'polyline.mt-path[data-optimizer="{name}"]').get_attribute('points').count(',') == 18
    loss = root.locator('.mt-legend li[data-optimizer="Adam"] .mt-loss').inner_text()
    assert float(loss) == pytest.approx(run['Adam']['loss'][17], rel=1e-3)
    assert 'step 17 of 30' in root.locator('.mt-status').inner_text()
    v.shot('race-step17')

    # the run selector switches to the other precomputed run, at the same step
    at17 = markers(root)
    root.locator('select.mt-run').select_option(label='lr ×2')
    assert root.get_attribute('data-run') == 'lr ×2' and root.get_attribute('data-step') == '17'
    run2 = rb['runs'][1]['paths']
    for name, (cx, cy) in markers(root).items():
        assert (cx, cy) == pytest.approx(to_px(rb, run2[name]['x'][17], run2[name]['y'][17]), abs=0.11)
        assert (cx, cy) != at17[name]
    assert root.locator('.mt-legend li[data-optimizer="Adam"] .mt-lr').inner_text() == 'lr 0.1'

    # play runs to the end and stops there; pause holds the step
    root.locator('button.mt-play').click()
    v.page.wait_for_function("r => r.dataset.playing === 'false' && r.dataset.step === '30'", arg=root.element_handle(),
                             timeout=10_000)
    assert root.locator('button.mt-play').inner_text() == 'Play'
    root.locator('button.mt-play').click()            # from the end, play starts over
    v.page.wait_for_function("r => Number(r.dataset.step) > 0", arg=root.element_handle())
    # pause, in the page's own tick (a slow machine may have played to the end already; then there is nothing to pause)
    held = root.evaluate("r => { if (r.dataset.playing === 'true') r.querySelector('.mt-play').click(); return r.dataset.step; }")
    assert int(held) > 0 and root.locator('button.mt-play').inner_text() == 'Play'
    v.page.wait_for_timeout(300)
    assert root.get_attribute('data-step') == held and root.get_attribute('data-playing') == 'false'

    # the surface selector redraws contours and runs
    before = root.locator('.mt-contours path').first.get_attribute('d')
    root.locator('select.mt-surface').select_option(label='saddle')
    assert root.get_attribute('data-surface') == 'saddle' and root.get_attribute('data-run') == 'lr = 0.01'
    assert root.locator('.mt-contours path').first.get_attribute('d') != before
    assert root.locator('select.mt-run option').all_inner_texts() == ['lr = 0.01']
    slide(root.locator('input.mt-step'), 30)
    v.shot('race-saddle')
    v.check_offline()


@pytest.mark.browser
def test_race_shows_a_stopped_path(open_page, tmp_path):
    race = OptimizerRace()
    race.add_surface('bowl', lambda x, y: x ** 2 + y ** 2, (-1, 1), (-1, 1), n=9)
    race.add_run('bowl', 0.1, {'long': [[0.8, 0.8], [0.6, 0.6], [0.4, 0.4], [0.2, 0.2]], 'short': [[-0.8, 0.5], [-0.5, 0.3]]})
    v = open_page(race.save(tmp_path / 'stopped.html'), Page)
    root = v.page.locator('.mytorch-race')
    slide(root.locator('input.mt-step'), 3)
    assert root.locator('.mt-legend li[data-optimizer="short"] .mt-note').inner_text() == 'stopped at step 1'
    assert root.locator('.mt-legend li[data-optimizer="long"] .mt-note').inner_text() == ''
    assert markers(root)['short'] == pytest.approx(to_px(race.data['surfaces'][0], -0.5, 0.3), abs=0.11)
    v.check_offline()


def highlighted(root, selector):
    return root.locator(f'{selector} .highlight').evaluate_all("cs => cs.map(c => [c.dataset.row, c.dataset.col].map(Number))")


@pytest.mark.browser
def test_conv_in_browser(open_page, tmp_path):
    viz, x, w = small_conv()
    v = open_page(viz.save(tmp_path / 'conv.html'), Page)
    root = v.page.locator('.mytorch-conv')
    assert root.get_attribute('data-position') == '0'
    assert root.get_attribute('data-case') == 'stride 1, padding 0, dilation 1'
    # window 0: the top-left 3×3 taps, column 0 of X, output (0, 0)
    assert sorted(highlighted(root, '.mt-input')) == [[i, j] for i in range(3) for j in range(3)]
    assert root.locator('.mt-im2col .mt-cell.highlight[data-k]').evaluate_all("cs => cs.map(c => c.dataset.l)") == ['0'] * 9
    assert highlighted(root, '.mt-output') == [[0, 0]]
    v.shot('conv-start')

    # next, next: window 2 = output (0, 2), taps in columns 2..4
    root.locator('button.mt-next').click()
    root.locator('button.mt-next').click()
    assert root.get_attribute('data-position') == '2'
    assert sorted(highlighted(root, '.mt-input')) == [[i, j] for i in range(3) for j in range(2, 5)]
    assert highlighted(root, '.mt-output') == [[0, 2]]
    col = root.locator('.mt-im2col .mt-cell.highlight[data-k]')
    assert set(col.evaluate_all("cs => cs.map(c => c.dataset.l)")) == {'2'}
    assert [float(t) for t in col.all_inner_texts()] == x[0:3, 2:5].ravel().tolist()
    root.locator('button.mt-prev').click()
    assert root.get_attribute('data-position') == '1' and highlighted(root, '.mt-output') == [[0, 1]]

    # the case selector: padding 1 draws the zeros, and window 0 reads five of them
    root.locator('select.mt-case').select_option(label='stride 1, padding 1, dilation 1')
    assert root.get_attribute('data-case') == 'stride 1, padding 1, dilation 1'
    assert root.locator('.mt-input .mt-cell').count() == 49 and root.locator('.mt-input .mt-cell.mt-pad').count() == 49 - 25
    slide(root.locator('input.mt-pos'), 0)
    assert root.locator('.mt-input .mt-cell.highlight.mt-pad').count() == 5
    assert '5 of its 9 taps on padding' in root.locator('.mt-status').inner_text()
    v.shot('conv-padding')

    # stride 2: window 4 (the middle output) starts two rows and two columns further on
    root.locator('select.mt-case').select_option(label='stride 2, padding 1, dilation 1')
    slide(root.locator('input.mt-pos'), 4)
    assert sorted(highlighted(root, '.mt-input')) == [[i, j] for i in range(2, 5) for j in range(2, 5)]
    assert highlighted(root, '.mt-output') == [[1, 1]]
    assert root.locator('.mt-im2col .mt-y.highlight').get_attribute('data-l') == '4'
    v.shot('conv-stride2')

    # dilation 2: taps two apart, the cells between them inside the span but not read
    root.locator('select.mt-case').select_option(label='stride 1, padding 0, dilation 2')
    assert sorted(highlighted(root, '.mt-input')) == [[i, j] for i in (0, 2, 4) for j in (0, 2, 4)]
    assert root.locator('.mt-input .mt-span').count() == 25 - 9
    assert root.locator('input.mt-pos').get_attribute('max') == '0'
    v.shot('conv-dilation2')

    # clicking an output cell jumps to its window
    root.locator('select.mt-case').select_option(label='stride 1, padding 0, dilation 1')
    root.locator('.mt-output .mt-cell[data-row="2"][data-col="1"]').click()
    assert root.get_attribute('data-position') == str(2 * 3 + 1)
    v.check_offline()


@pytest.mark.browser
def test_widgets_share_a_page(open_page, tmp_path):
    "Two races and a visualizer on one page: each control moves its own widget only."
    viz, _, _ = small_conv()
    a, b = small_race(10), small_race(10)
    page = tmp_path / 'three.html'
    page.write_text(f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>three</title></head><body>'
                    f'{a.html()}\n{viz.html()}\n{b.html()}</body></html>', encoding='utf-8')
    v = open_page(page, Page)
    races = v.page.locator('.mytorch-race')
    assert races.count() == 2 and v.page.locator('.mytorch-conv').count() == 1
    slide(races.nth(1).locator('input.mt-step'), 7)
    races.nth(0).locator('select.mt-surface').select_option(label='saddle')
    v.page.locator('.mytorch-conv button.mt-next').click()
    assert [races.nth(i).get_attribute('data-step') for i in (0, 1)] == ['0', '7']
    assert [races.nth(i).get_attribute('data-surface') for i in (0, 1)] == ['saddle', 'Rosenbrock']
    assert v.page.locator('.mytorch-conv').get_attribute('data-position') == '1'
    assert v.page.locator('.mytorch-conv .mt-output .highlight').count() == 1
    v.shot('race-conv-shared-page')
    v.check_offline()
