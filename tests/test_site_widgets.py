"""The widgets where the book shows them: in the chapter pages that `make book` built into _site/.

`tests/test_viz.py` and `tests/test_widgets.py` test each widget's program on a page of its own;
here each chapter that teaches a widget's idea is opened from file:// as a reader opens it, and
its widget must be there, drawn, and respond to a click or a slider move. `test_site.py` already
fails a page on any request that leaves the machine, failed request or JavaScript error.
"""
import pytest

from test_site import SITE, Visit, site  # noqa: F401  (site is a fixture)

SHOTS = SITE.parent / "test-artifacts" / "widgets"
# chapter page -> the widgets it must show, in page order
WIDGET_PAGES = {
    "03_viz": ["graph"],
    "10_engine": ["graph"],
    "04_widgets": ["race", "conv"],
    "25_conv": ["conv"],
    "30_optim": ["race"],
}

pytestmark = pytest.mark.browser


def slide(slider, value):
    "Move a range input as a user dragging it does: set the value, fire `input`."
    slider.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }", str(value))


def check_graph(root):
    "reset, then step: one node more is visited; a click on a node selects it and highlights its path."
    visited = lambda: root.locator(".mt-node.visited").count()
    root.locator('button[data-action="reset"]').click()
    assert visited() == 0
    root.locator('button[data-action="next"]').click()
    assert visited() == 1
    root.locator('button[data-action="next"]').click()
    assert visited() == 2
    leaf = root.locator(".mt-node").last
    leaf.click()
    assert root.locator(".mt-node.selected").count() == 1
    assert root.locator(".mt-node.on-path").count() >= 2  # the node and the output at least
    assert root.locator(".mt-panel h4").inner_text().strip()


def marker_positions(root):
    return root.locator("circle.mt-marker").evaluate_all("ms => ms.map(m => [m.getAttribute('cx'), m.getAttribute('cy')])")


def check_race(root):
    "The slider moves the markers; the run selector switches to another precomputed run."
    assert root.locator(".mt-contours path").count() > 0
    assert root.get_attribute("data-step") == "0"
    start = marker_positions(root)
    slider = root.locator("input.mt-step")
    slide(slider, 10)
    assert root.get_attribute("data-step") == "10"
    at10 = marker_positions(root)
    assert at10 != start
    options = root.locator("select.mt-run option").all_inner_texts()
    assert len(options) >= 2, f"one learning-rate run only: {options}"
    before = root.get_attribute("data-run")
    root.locator("select.mt-run").select_option(label=options[1] if options[0] == before else options[0])
    assert root.get_attribute("data-run") != before
    assert marker_positions(root) != at10


def check_conv(root):
    "next moves the window: the highlighted output cell and im2col column change."
    out = lambda: root.locator(".mt-output .mt-cell.highlight").evaluate_all(
        "cs => cs.map(c => [c.dataset.row, c.dataset.col])")
    assert root.get_attribute("data-position") == "0"
    first = out()
    assert len(first) == 1
    root.locator("button.mt-next").click()
    assert root.get_attribute("data-position") == "1"
    assert out() != first and len(out()) == 1
    assert set(root.locator(".mt-im2col .mt-cell.highlight[data-k]").evaluate_all("cs => cs.map(c => c.dataset.l)")) == {"1"}
    assert root.locator(".mt-input .mt-cell.highlight").count() > 0


CHECKS = {"graph": check_graph, "race": check_race, "conv": check_conv}


@pytest.mark.parametrize("name", list(WIDGET_PAGES))
def test_chapter_widgets_respond(browser, site, name):  # noqa: F811
    v = Visit(browser, site, name)
    try:
        widgets = v.page.locator("div.mytorch-widget")
        kinds = widgets.evaluate_all("ws => ws.map(w => w.dataset.widget)")
        for kind in WIDGET_PAGES[name]:
            assert kind in kinds, f"{name}.html shows no {kind} widget (it shows {kinds}): run `make book`"
        SHOTS.mkdir(parents=True, exist_ok=True)
        for i, kind in enumerate(kinds):
            root = widgets.nth(i)
            root.scroll_into_view_if_needed()
            assert root.locator("svg, .mt-grid").count() > 0, f"the {kind} widget on {name}.html drew nothing"
            CHECKS[kind](root)
            root.screenshot(path=SHOTS / f"site-{name}-{i}-{kind}.png")
        v.check_offline()
    finally:
        v.page.close()
