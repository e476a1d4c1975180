"""mytorch.viz: draw_graph / render_graph (both engines), the built-in layout, and the live graph widget in Chromium."""
import math
import os
import random
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import OfflinePage

import mytorch.engine as engine
from mytorch.engine import tensor, float64
from mytorch.scalar import Value, _topological_order
from mytorch.viz import GraphDrawing, GraphWidget, Widget, draw_graph, layered_layout, render_graph, _graph_of, _crossings

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "widgets"
SVG_NS = "{http://www.w3.org/2000/svg}"
HAVE_DOT = shutil.which("dot") is not None
ENGINES = ["builtin", pytest.param("dot", marks=pytest.mark.skipif(
    not HAVE_DOT and not os.environ.get("CI"),
    reason="Graphviz's dot is not installed (apt-get install graphviz); CI runs this test"))]


def neuron():
    "micrograd's neuron, o = tanh(x1 w1 + x2 w2 + b), after backward: 10 Values, 9 edges."
    x1, x2 = Value(2.0, label="x1"), Value(0.0, label="x2")
    w1, w2 = Value(-3.0, label="w1"), Value(1.0, label="w2")
    b = Value(6.8813735870195432, label="b")
    n = x1 * w1 + x2 * w2 + b; n.label = "n"
    o = n.tanh(); o.label = "o"
    o.backward()
    return o


def tensor_expr(retain=True):
    "L = sum(x * w + x) with x (2, 3) and w (3,) in float64: ops SumTo, Add, Mul and leaves x, w; x is used twice."
    x = tensor([[1., 2., 3.], [4., 5., 6.]], dtype=float64, requires_grad=True)
    w = tensor([0.5, -1., 2.], dtype=float64, requires_grad=True)
    h = x * w
    if retain: h.retain_grad()
    L = (h + x).sum_to_size(())
    L.backward()
    return L, x, w, h


def parse(svg):
    "(node groups, edge groups, all text) of a drawing's SVG, which must parse as XML."
    root = ET.fromstring(svg)
    assert root.tag == SVG_NS + "svg"
    groups = list(root.iter(SVG_NS + "g"))
    nodes = [g for g in groups if g.get("class") == "node"]
    edges = [g for g in groups if g.get("class") == "edge"]
    return nodes, edges, "".join(root.itertext())


def box_texts(nodes):
    return ["\n".join(t.strip() for t in g.itertext() if t.strip()) for g in nodes]


# ---- the drawing --------------------------------------------------------------------------

@pytest.mark.parametrize("eng", ENGINES)
def test_value_graph_drawn(eng):
    if eng == "dot" and not HAVE_DOT:
        pytest.fail("CI is set but Graphviz's dot is missing: make test installs graphviz")
    o = neuron()
    d = draw_graph(o, engine=eng)
    assert d.engine == eng
    nodes, edges, text = parse(d.svg)
    assert (len(nodes), len(edges)) == (10, 9)
    boxes = box_texts(nodes)
    for want in ["o: tanh", "n: +", "x1", "w1", "b"]:
        assert any(box.splitlines()[0] == want for box in boxes), (want, boxes)
    w1 = next(box for box in boxes if box.startswith("w1"))
    assert "data -3" in w1 and "grad 1" in w1          # do/dw1 = x1 * (1 - o^2) = 2 * 0.5
    assert "data 0.7071" in text and "grad -1.5" in text
    assert "<?xml" not in d.svg and " id=" not in d.svg  # embeddable: several drawings on one page


@pytest.mark.parametrize("eng", ENGINES)
def test_reuse_and_tensor_graph(eng):
    if eng == "dot" and not HAVE_DOT:
        pytest.fail("CI is set but Graphviz's dot is missing: make test installs graphviz")
    x = Value(3.0, label="x")
    y = x * x
    y.backward()
    nodes, edges, _ = parse(draw_graph(y, engine=eng).svg)
    assert (len(nodes), len(edges)) == (2, 2)           # two arrows from x into x * x

    L, x, w, h = tensor_expr()
    d = draw_graph(L, engine=eng, names={"x": x, "w": w})
    nodes, edges, text = parse(d.svg)
    assert (len(nodes), len(edges)) == (5, 5)           # SumTo <- Add <- (Mul, x); Mul <- (x, w)
    boxes = box_texts(nodes)
    titles = sorted(box.splitlines()[0] for box in boxes)
    assert titles == ["AddBackward", "MulBackward", "SumToBackward", "w", "x"]
    assert "(2, 3) float64" in text and "(3,) float64" in text and "() float64" in text
    assert "data [0.5, -1, 2]" in text and "grad [5, 7, 9]" in text         # w and dL/dw = column sums of x
    mul = next(box for box in boxes if box.startswith("MulBackward"))
    assert "data -5 … 12, mean 2.25" in mul and "grad 1 … 1, mean 1" in mul  # retained: value and grad
    add = next(box for box in boxes if box.startswith("AddBackward"))
    assert "grad —" in add                              # not retained: the engine did not keep it


def test_backward_order_is_the_engines():
    "Nodes are numbered in the order backward reaches them: checked against both engines, by capture."
    o = neuron()
    g = _graph_of(o)
    assert g.objects == list(reversed(_topological_order(o)))

    # a graph with reuse at two levels, read before backward
    x = tensor([[1., 2., 3.], [4., 5., 6.]], dtype=float64, requires_grad=True)
    w = tensor([0.5, -1., 2.], dtype=float64, requires_grad=True)
    L = ((x * w + x) * (x + w)).sum_to_size(())
    g = _graph_of(L)
    ops = [o for o in g.objects if hasattr(o, "edges")]
    assert ops == list(reversed(engine._topological_nodes([L.grad_fn])))
    # capture: the order in which run_backward calls the nodes' backward
    reached, originals = [], {}
    for fn in {n.fn for n in ops}:      # the Function classes: Add, Mul, SumTo; a backward that records nothing runs
        name = "backward_numpy" if fn.backward_numpy is not None else "backward"   # the rule on arrays when there is one
        originals[fn] = name, fn.__dict__[name]
        def spy(ctx, *grads, _rule=originals[fn][1].__func__):
            reached.append(ctx)
            return _rule(ctx, *grads)
        setattr(fn, name, staticmethod(spy))
    try: L.backward()
    finally:
        for fn, (name, orig) in originals.items(): setattr(fn, name, orig)
    assert reached == ops
    # every leaf comes after every node that sends it a gradient
    index = {id(o): i for i, o in enumerate(g.objects)}
    for s, d in g.edges: assert d < s, (s, d)
    assert {id(o) for o in g.objects if not hasattr(o, "edges")} == {id(x), id(w)}
    assert index[id(x)] > max(index[id(n)] for n in ops if any(e and e[0] is x for e in n.edges))


def test_a_leaf_alone_and_a_constant():
    t = tensor([1.0, 2.0], requires_grad=True)
    nodes, edges, text = parse(draw_graph(t, engine="builtin").svg)
    assert (len(nodes), len(edges)) == (1, 0) and "leaf" in text
    _, _, text = parse(draw_graph(tensor([1, 2]), engine="builtin").svg)
    assert "tensor" in text and "(2,) int64" in text


# ---- the layout -------------------------------------------------------------------------

def random_dag(rng, n):
    "Node 0 is the output; node i > 0 feeds 1-2 nodes with smaller numbers, so 0..n-1 is a backward order."
    edges = []
    for i in range(1, n):
        for d in rng.sample(range(i), min(i, rng.choice([1, 1, 2]))): edges.append((i, d))
    return edges


def test_layered_layout_geometry():
    rng = random.Random(0)
    for trial in range(30):
        n = rng.randint(2, 40)
        edges = random_dag(rng, n)
        sizes = [(rng.randint(40, 140), rng.choice([40, 55, 70])) for _ in range(n)]
        lay = layered_layout(sizes, edges, list(range(n)))
        for (s, d), pts in zip(edges, lay.routes):
            assert lay.layer[s] > lay.layer[d]                          # longest path: inputs further left
            (sx, sy), (dx, dy) = lay.pos[s], lay.pos[d]
            assert pts[0][0] == pytest.approx(sx + sizes[s][0] / 2, abs=0.1)   # leaves s's right side
            assert pts[-1][0] == pytest.approx(dx - sizes[d][0] / 2, abs=0.1)  # enters d's left side
            assert abs(pts[0][1] - sy) <= sizes[s][1] / 2 and abs(pts[-1][1] - dy) <= sizes[d][1] / 2
            assert all(a[0] <= b[0] for a, b in zip(pts, pts[1:]))       # always rightwards
        for v in range(n):
            x, y = lay.pos[v]
            w, h = sizes[v]
            assert 0 <= x - w / 2 and x + w / 2 <= lay.width and 0 <= y - h / 2 and y + h / 2 <= lay.height
        for a in range(n):                                                  # no two boxes overlap
            for b in range(a + 1, n):
                (xa, ya), (xb, yb) = lay.pos[a], lay.pos[b]
                assert (abs(xa - xb) * 2 >= sizes[a][0] + sizes[b][0] or
                        abs(ya - yb) * 2 >= sizes[a][1] + sizes[b][1]), (trial, a, b)


def test_barycenter_sweeps_reduce_crossings():
    rng = random.Random(1)
    before = after = 0
    for _ in range(40):
        n = rng.randint(8, 30)
        edges = random_dag(rng, n)
        sizes = [(60, 40)] * n
        before += layered_layout(sizes, edges, list(range(n)), sweeps=0).crossings
        after += layered_layout(sizes, edges, list(range(n)), sweeps=8).crossings
    assert after < 0.8 * before, (before, after)


def test_layout_checks_its_order():
    with pytest.raises(ValueError, match="must list every node once, after the nodes that consume it"):
        layered_layout([(10, 10)] * 2, [(0, 1)], [0, 1])


# ---- errors and files --------------------------------------------------------------------

def test_errors():
    o = neuron()
    with pytest.raises(ValueError, match="engine must be one of"): draw_graph(o, engine="neato")
    with pytest.raises(TypeError, match="draws the graph of a mytorch Value or Tensor"): draw_graph([o])
    z = Value(1.0)
    for _ in range(200): z = z + 1.0
    with pytest.raises(ValueError, match=r"401 nodes, more than max_nodes=300.*max_nodes=401"): draw_graph(z)
    with pytest.raises(ValueError, match="more than max_nodes=150"): GraphWidget(z)
    chain = tensor([1.0], requires_grad=True)
    for _ in range(20_000): chain = chain * 1.0
    with pytest.raises(ValueError, match="20001 nodes"): draw_graph(chain)   # refused, not laid out


def test_missing_dot(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))   # nothing on PATH, so no dot
    o = neuron()
    for call in (lambda: draw_graph(o, engine="dot"), lambda: render_graph(o, tmp_path / "g.png")):
        with pytest.raises(RuntimeError) as e: call()
        assert "apt-get install graphviz" in str(e.value) and "mytorch[viz]" in str(e.value)
        assert "engine='builtin'" in str(e.value)
    assert draw_graph(o).engine == "builtin"     # 'auto' falls back
    assert render_graph(o, tmp_path / "g.svg").exists()


def test_render_graph(tmp_path):
    o = neuron()
    path = render_graph(o, tmp_path / "neuron.svg", engine="builtin")
    nodes, edges, _ = parse(path.read_text(encoding="utf-8").split("\n", 1)[1])
    assert (len(nodes), len(edges)) == (10, 9)
    assert ET.parse(path).getroot().tag == SVG_NS + "svg"                 # a standalone file, prolog included
    with pytest.raises(ValueError, match="SVG only"): render_graph(o, tmp_path / "n.png", engine="builtin")
    with pytest.raises(ValueError, match=r"writes \.svg, \.png or \.pdf"): render_graph(o, tmp_path / "n.gif")
    with pytest.raises(FileNotFoundError, match="does not exist"): render_graph(o, tmp_path / "no" / "n.svg")
    drawing = draw_graph(o, engine="builtin")
    assert drawing.save(tmp_path / "again.svg").read_text(encoding="utf-8").endswith(drawing.svg + "\n")
    if HAVE_DOT or os.environ.get("CI"):
        assert render_graph(o, tmp_path / "neuron.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert render_graph(drawing, tmp_path / "neuron.pdf").read_bytes()[:5] == b"%PDF-"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]   # no temporary file left
    assert oct((tmp_path / "neuron.svg").stat().st_mode & 0o777) != oct(0o600)


# ---- the widget in a browser --------------------------------------------------------------

class GraphPage(OfflinePage):
    "A graph widget's page: how many nodes backward has visited, and the status line."
    def visited(self, widget=0):
        return self.page.locator(".mytorch-graph").nth(widget).locator(".mt-node.visited").count()

    def status(self, widget=0):
        return self.page.locator(".mytorch-graph").nth(widget).locator(".mt-status").inner_text()


def path_to_output(data, i):
    "Node ids on a path from node i to the output, and the edges between them (what the widget highlights)."
    on, todo = {i}, [i]
    while todo:
        v = todo.pop()
        for e in data["edges"]:
            if e["source"] == v and e["target"] not in on: on.add(e["target"]); todo.append(e["target"])
    return on, sum(e["source"] in on and e["target"] in on for e in data["edges"])


@pytest.mark.browser
def test_widget_click_shows_value_grad_and_path(open_page, tmp_path):
    SHOTS.mkdir(parents=True, exist_ok=True)
    widget = GraphWidget(neuron())
    page = open_page(widget.save(tmp_path / "graph.html"), GraphPage)
    p = page.page
    data = widget.data
    assert p.locator(".mt-node").count() == len(data["nodes"]) == 10
    assert p.locator(".mt-edge").count() == len(data["edges"]) == 9
    assert "Backward done" in page.status() and page.visited() == 10
    p.screenshot(path=SHOTS / "graph-open.png", full_page=True)

    w1 = next(n for n in data["nodes"] if n["title"] == "w1")
    p.locator(f'.mt-node[data-node-id="{w1["id"]}"]').click()
    panel = p.locator(".mt-panel")
    assert panel.locator("h4").inner_text() == "w1"
    assert panel.locator(".mt-value").inner_text() == w1["value_full"] == "-3.0"
    assert panel.locator(".mt-grad-full").inner_text() == w1["grad_full"]
    assert float(w1["grad_full"]) == pytest.approx(1.0)
    on, n_edges = path_to_output(data, w1["id"])
    shown = {int(i) for i in p.eval_on_selector_all(".mt-node.on-path", "els => els.map(e => e.dataset.nodeId)")}
    assert shown == on and len(on) == 5                 # w1, x1*w1, the sum, n, o
    assert p.locator(".mt-edge.on-path").count() == n_edges == 4
    assert p.locator(".mt-node.selected").count() == 1
    p.screenshot(path=SHOTS / "graph-selected.png", full_page=True)

    p.locator(".mytorch-graph svg").click(position={"x": 3, "y": 3})   # the background clears it
    p.mouse.move(1000, 650)
    assert p.locator(".mt-node.on-path").count() == 0 and p.locator(".mt-node.selected").count() == 0
    page.check_offline()


@pytest.mark.browser
def test_widget_steps_through_backward(open_page, tmp_path):
    widget = GraphWidget(neuron())
    page = open_page(widget.save(tmp_path / "graph.html"), GraphPage)
    p = page.page
    order = widget.data["order"]
    p.locator('button[data-action="reset"]').click()
    assert page.visited() == 0 and "Before backward" in page.status()
    assert set(p.locator(".mt-grad").all_text_contents()) == {"grad ?"}
    statuses = [page.status()]
    for k in range(1, 4):
        p.locator('button[data-action="next"]').click()
        assert page.visited() == k
        statuses.append(page.status())
        node = widget.data["nodes"][order[k - 1]]
        assert f"Step {k} of 10" in statuses[-1] and node["title"] in statuses[-1]
        visited = p.eval_on_selector_all(".mt-node.visited", "els => els.map(e => +e.dataset.nodeId)")
        assert sorted(visited) == sorted(order[:k])
        reached = p.locator(f'.mt-node[data-node-id="{order[k - 1]}"] .mt-grad').text_content()
        assert reached == node["grad"] != "grad ?"
    assert len(set(statuses)) == len(statuses)
    p.screenshot(path=SHOTS / "graph-step.png", full_page=True)
    p.locator('button[data-action="prev"]').click()
    assert page.visited() == 2
    p.locator('button[data-action="play"]').click()
    p.wait_for_function("() => document.querySelectorAll('.mt-node.visited').length === 10", timeout=20_000)
    assert "Backward done" in page.status()
    page.check_offline()


@pytest.mark.browser
def test_tensor_widget_and_two_widgets_on_a_page(open_page, tmp_path):
    L, x, w, h = tensor_expr(retain=False)
    a, b = GraphWidget(L, names={"x": x, "w": w}), GraphWidget(neuron())
    page_path = tmp_path / "two.html"
    page_path.write_text(f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>two</title></head><body>'
                         f'{a.html()}\n{b.html()}</body></html>', encoding="utf-8")
    page = open_page(page_path, GraphPage)
    p = page.page
    first, second = p.locator(".mytorch-graph").nth(0), p.locator(".mytorch-graph").nth(1)
    assert first.locator(".mt-node").count() == 5 and second.locator(".mt-node").count() == 10
    add = next(n for n in a.data["nodes"] if n["title"] == "AddBackward")
    first.locator(f'.mt-node[data-node-id="{add["id"]}"]').click()
    assert "not kept" in first.locator(".mt-grad-full").inner_text()        # not retained
    assert "[[" in first.locator(".mt-value").inner_text() or "not kept" in first.locator(".mt-value").inner_text()
    assert second.locator(".mt-node.selected").count() == 0                  # the other widget did not react
    first.locator('button[data-action="reset"]').click()
    assert page.visited(0) == 0 and page.visited(1) == 10
    wn = next(n for n in a.data["nodes"] if n["title"] == "w")
    first.locator(f'.mt-node[data-node-id="{wn["id"]}"]').click()
    assert "not reached yet" in first.locator(".mt-grad-full").inner_text()
    p.screenshot(path=SHOTS / "graph-tensor.png", full_page=True)
    page.check_offline()
