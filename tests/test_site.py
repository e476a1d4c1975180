"""The built book (_site/, from `make book`) as a reader sees it, offline, in headless Chromium."""
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from playwright.sync_api import Error as PlaywrightError

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_site"
SHOTS = ROOT / "test-artifacts" / "site"
# Anything else (http:, https:, ws:, ...) would need a network the offline book must not use.
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")

pytestmark = pytest.mark.browser


def book_pages():
    "One page per notebook in nbs/, the home page first."
    stems = sorted(p.stem for p in (ROOT / "nbs").glob("*.ipynb") if not p.name.startswith(("_", ".")))
    return ["index"] + [s for s in stems if s != "index"]


@pytest.fixture(scope="module")
def site():
    if not (SITE / "index.html").exists():
        pytest.fail(f"{SITE / 'index.html'} is missing: run `make book` first")
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SITE


def title_of(page):
    "The page's H1 without its permalink."
    return page.evaluate("""() => { const h = document.querySelector('article h1').cloneNode(true);
        h.querySelectorAll('.headerlink').forEach(e => e.remove()); return h.textContent.trim(); }""")


class Visit:
    "A page opened from file:// with every request, failure and error it caused recorded."
    def __init__(self, browser, site, name):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        # generous: MathJax typesetting a long chapter takes seconds on a loaded 2-core machine
        self.page.set_default_timeout(120_000)
        # recorded below, then refused, so that a leak fails fast and the same with or without a network
        self.page.route(re.compile(r"^(?!(file|data|blob|about):)"), lambda route: route.abort())
        self.requests, self.failed, self.errors = [], [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("requestfailed", lambda r: self.failed.append(f"{r.url}: {r.failure}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        self.page.goto((site / f"{name}.html").as_uri(), wait_until="load")
        self.settle()

    def settle(self):
        "Wait for MathJax (where the page loads it) to finish typesetting and fetching its fonts."
        if self.page.locator("script[src*='mathjax']").count():
            try:
                self.page.wait_for_function("() => !!window.MathJax?.startup?.promise", timeout=60_000)
                self.page.evaluate("() => MathJax.startup.promise")
            except PlaywrightError as e:
                self.errors.append(f"MathJax did not start: {e.message.splitlines()[0]}")
        self.page.evaluate("() => document.fonts.ready.then(() => true)")
        self.page.wait_for_load_state("networkidle")

    def check_offline(self):
        remote = [u for u in self.requests if not u.startswith(LOCAL_SCHEMES)]
        assert not remote, f"requests that leave the machine: {remote}"
        assert not self.failed, f"failed requests: {self.failed}"
        assert not self.errors, "\n".join(self.errors)


@pytest.fixture
def visit(browser, site):
    visits = []
    def _open(name):
        visits.append(Visit(browser, site, name))
        return visits[-1]
    yield _open
    for v in visits: v.page.close()


@pytest.mark.parametrize("name", book_pages())
def test_page_reads_offline(visit, site, name):
    assert (site / f"{name}.html").exists(), f"no page for nbs/{name}.ipynb in {site}: run `make book`"
    v = visit(name)
    page = v.page
    page.screenshot(path=SHOTS / f"{name}.png", full_page=True)
    v.check_offline()

    titles = page.locator("article h1")
    assert titles.count() == 1, (f"{titles.count()} titles (# headings) on the page: a chapter has one, "
                                 f"its sections use ##: {titles.all_inner_texts()[:5]}")
    assert title_of(page) and title_of(page) in page.title()

    # nbdev directives (`#| export`, `#| torch`, ...) are for tools, not readers
    code = "\n".join(page.locator("div.highlight pre").all_inner_texts())
    leaked = [line for line in code.splitlines() if re.match(r"\s*#\|", line)]
    assert not leaked, f"directive comments shown in code cells: {leaked}"

    broken = page.evaluate("() => [...document.images].filter(i => !i.complete || !i.naturalWidth).map(i => i.src)")
    assert not broken, f"images that did not load: {broken}"

    # links within the book lead to a page that exists, and to an element on it
    for href in page.evaluate("() => [...document.querySelectorAll('article a[href]')].map(a => a.href)"):
        if not href.startswith("file:"): continue
        target, _, anchor = href.partition("#")
        path = Path(unquote(urlparse(target).path))
        assert path.exists(), f"link to a missing page: {href}"
        if anchor and path.suffix == ".html":
            assert f'id="{anchor}"' in path.read_text(encoding="utf-8"), f"link to a missing anchor: {href}"

    # saved outputs show results, not accidents: no traceback, no warning a cell let escape
    outputs = "\n".join(page.locator(".cell_output").all_inner_texts())
    accidents = re.findall(r"Traceback \(most recent call last\)|\b\w*Warning: .*", outputs)
    assert not accidents, f"a traceback or warning in the saved outputs: {accidents[:3]}"

    if page.locator(".math").count():  # `$...$` and `$$...$$` in the notebook
        untypeset = page.evaluate("() => [...document.querySelectorAll('.math')]"
                                  ".filter(e => !e.querySelector('mjx-container')).map(e => e.textContent)")
        assert not untypeset, f"math MathJax did not typeset: {untypeset[:5]}"
        errors = page.evaluate("() => [...document.querySelectorAll('mjx-merror')]"
                               ".map(e => (e.getAttribute('data-mjx-error') || '') + ' in ' + e.closest('.math')?.textContent)")
        assert not errors, f"LaTeX that MathJax could not read: {errors[:5]}"
        prose = page.evaluate("""() => { const a = document.querySelector('article').cloneNode(true);
            a.querySelectorAll('pre, code, mjx-container').forEach(e => e.remove()); return a.innerText; }""")
        raw = [t for t in ("$$", "\\(", "\\[") if t in prose]
        assert not raw, f"raw TeX delimiters left in the text: {raw}"


def test_book_has_math(site):
    "The book derives gradients: some page has math, and the test above checks it is typeset there."
    with_math = [p for p in book_pages() if 'class="math' in (site / f"{p}.html").read_text(encoding="utf-8")]
    assert with_math, "no page has LaTeX math ($...$ or $$...$$)"


def test_navigation(visit):
    "The home page's chapter list leads to each chapter; next/previous links walk the book."
    chapters = book_pages()[1:]
    if not chapters: pytest.skip("the book has no chapters yet")
    v = visit("index")
    page = v.page
    link = page.locator(f".sidebar-tree a[href='{chapters[0]}.html']").first
    title = link.inner_text().strip()
    link.click()
    page.wait_for_url(f"**/{chapters[0]}.html")
    v.settle()
    assert title_of(page) == title

    for name in chapters[1:]:
        page.locator("a.next-page").click()
        page.wait_for_url(f"**/{name}.html")
        v.settle()
    page.locator("a.prev-page").click()
    page.wait_for_url(f"**/{chapters[-2] if len(chapters) > 1 else 'index'}.html")
    v.check_offline()


def test_search(visit):
    "The search box works offline: a word of a chapter's title finds that chapter."
    chapters = book_pages()[1:]
    if not chapters: pytest.skip("the book has no chapters yet")
    v = visit(chapters[0])
    word = max(re.findall(r"[A-Za-z]+", title_of(v.page)), key=len)
    v.page.fill("input[name=q]", word)
    v.page.press("input[name=q]", "Enter")
    v.page.wait_for_url("**/search.html?q=*")
    hits = v.page.locator(f"#search-results a[href^='{chapters[0]}.html']")
    hits.first.wait_for(timeout=60_000)
    v.check_offline()
