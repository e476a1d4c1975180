"""Shared pytest fixtures."""
import os
import re
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")  # Debian's; set CHROMIUM to use another
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="session")
def browser():
    "Headless Debian Chromium driven by Playwright, started once per test session."
    from playwright import sync_api
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (make test does)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class OfflinePage:
    """A page opened in Chromium with every request, failed request and JavaScript error recorded.

    Requests to anything but file:, data:, blob: and about: are refused (the book and its widgets
    must not need a network), and show up both as requests and as failures."""
    def __init__(self, browser, url, viewport=(1100, 900), timeout_ms=30_000):
        self.page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        self.page.set_default_timeout(timeout_ms)
        self.page.route(re.compile(r"^(?!(file|data|blob|about):)"), lambda route: route.abort())
        self.requests, self.failed, self.errors = [], [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("requestfailed", lambda r: self.failed.append(f"{r.url}: {r.failure}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.errors.append(f"console {m.type}: {m.text}"))
        self.page.goto(url, wait_until="load")

    def check_offline(self):
        remote = [u for u in self.requests if not u.startswith(("file:", "data:", "blob:", "about:"))]
        assert not remote, f"requests that leave the machine: {remote}"
        assert not self.failed, f"failed requests: {self.failed}"
        assert not self.errors, "\n".join(self.errors)


@pytest.fixture
def open_page(browser):
    "open_page(path, kind=OfflinePage): a saved HTML file opened from file://; closed after the test."
    pages = []
    def _open(path, kind=OfflinePage):
        pages.append(kind(browser, Path(path).as_uri()))
        return pages[-1]
    yield _open
    for p in pages: p.page.close()


def compiled_twin(kernel):
    """The compiled twin of `kernel` (a function marked with `compiled_kernel`), behind the kernel's check, as a
    call runs it. Skips when it was not built; fails instead when the `CI` environment variable is set, because
    `make test` builds the kernels and a missing one there is a broken build, not a machine without a compiler."""
    import mytorch.kernels as K
    entry = K._registry[kernel.__name__]
    if kernel.compiled is None:
        why = (f"the compiled {kernel.__name__} is unavailable ({entry.missing}); build the "
               "kernels with `python setup.py build_ext --inplace` (make test does)")
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the compiled kernels must be tested, but {why}")
        pytest.skip(why)
    return entry.checked("cython")


def checked_reference(kernel):
    "The NumPy reference of `kernel` behind the kernel's check, as a call runs it when the reference is chosen."
    import mytorch.kernels as K
    return K._registry[kernel.__name__].checked("numpy")


def running(kernel):
    "The function that a call of `kernel` runs after its check: its NumPy reference or its compiled twin."
    return kernel.impl
