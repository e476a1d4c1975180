"""A chapter run in JupyterLab, as `make lab` lets a reader run it: every cell through the interface, no error
in any output, and the chapter's widget drawn and answering clicks inside the notebook.

JupyterLab is started headless on 127.0.0.1 with a token, on a copy of the chapter (JupyterLab marks a notebook
changed as soon as its kernel starts, and nothing here may write to nbs/), with its settings, runtime files and
$HOME in a temporary directory. The copy sits in a mirror of the repository (symlinks), so a chapter's relative
paths (`../mytorch/js`, `../benchmarks`) resolve as they do in nbs/. The widgets are HTML and JavaScript in the
cells' `text/html` outputs (`Widget._repr_html_`): JupyterLab runs their scripts in outputs the reader's own kernel
produced (untrusted saved outputs stay inert until the cells are run), so no JupyterLab extension is involved.
"""
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from test_site_widgets import check_graph

ROOT = Path(__file__).resolve().parents[1]
# The engine chapter: its graph widget, and all its cells (torch parity, the overhead benchmark) in about 10 s.
CHAPTER = "10_engine.ipynb"
SHOTS = ROOT / "test-artifacts" / "lab"
START_S, RUN_ALL_S = 90, 150  # generous: a shared machine with two cores

pytestmark = pytest.mark.browser


def _cmdline(pid):
    try: return [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError: return []


def _kernels(runtime_dir):
    "The ids of the running kernels whose connection files are in `runtime_dir` (Linux /proc)."
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()
            and any(a.startswith(f"{runtime_dir}/kernel-") for a in _cmdline(d.name))]


def _mirror(tmp):
    "A repository whose entries are symlinks to this one's, except nbs/CHAPTER, a copy."
    repo = tmp / "repo"
    (repo / "nbs").mkdir(parents=True)
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "nbs"): (repo / entry.name).symlink_to(entry)
    for entry in (ROOT / "nbs").iterdir():
        if entry.name == CHAPTER: shutil.copyfile(entry, repo / "nbs" / CHAPTER)
        else: (repo / "nbs" / entry.name).symlink_to(entry)
    return repo


def _settings(settings_dir):
    "JupyterLab user settings: no autosave (the copy stays as copied), no news or update checks (no network)."
    for plugin, values in {"docmanager-extension/plugin": {"autosave": False},
                           "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}}.items():
        path = settings_dir / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    "A JupyterLab server in a process of its own; `stop` shuts it and its kernels down."
    def __init__(self, tmp):
        self.root = _mirror(tmp) / "nbs"
        home = tmp / "home"
        self.runtime = home / "runtime"  # the kernels' connection files: how `kernels` tells this server's kernels
        _settings(home / "lab-settings")
        env = dict(os.environ, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "config"),
                   JUPYTER_DATA_DIR=str(home / "data"), JUPYTER_RUNTIME_DIR=str(self.runtime),
                   JUPYTERLAB_SETTINGS_DIR=str(home / "lab-settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(home / "lab-workspaces"), IPYTHONDIR=str(home / "ipython"),
                   MPLCONFIGDIR=str(home / "matplotlib"), JUPYTER_PREFER_ENV_PATH="1")
        env.pop("JUPYTER_PATH", None); env.pop("JUPYTER_CONFIG_PATH", None)
        self.token, port = secrets.token_hex(16), _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = tmp / "jupyterlab.log"
        args = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.open_browser=False",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                "--LabApp.news_url=None"] + (["--allow-root"] if os.geteuid() == 0 else [])
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(args, cwd=self.root, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def log(self): return self.log_path.read_text(errors="replace")[-6000:]

    def api(self, path, method="GET", timeout=10):
        req = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r: return json.loads(r.read() or b"null")

    def wait_ready(self):
        deadline = time.monotonic() + START_S
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {self.proc.returncode} before answering:\n{self.log()}")
            try: return self.api("status", timeout=5)
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer within {START_S} s:\n{self.log()}")
                time.sleep(0.25)

    def kernels(self): return _kernels(self.runtime)

    def stop(self):
        if self.proc.poll() is None:
            try: self.api("shutdown", method="POST")  # shuts its kernels down too
            except OSError: pass
            try: self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try: self.proc.wait(10)
                except subprocess.TimeoutExpired: os.killpg(self.proc.pid, signal.SIGKILL); self.proc.wait()
        for pid in self.kernels():  # left behind (each kernel is a process group of its own)
            try: os.kill(pid, signal.SIGKILL)
            except ProcessLookupError: pass


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.fail("JupyterLab is missing: it is in the book environment (make book, make test install it)")
    server = Lab(tmp_path_factory.mktemp("lab"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


# The text of every code cell's prompt: "[ ]:" not run, "[*]:" queued or running, "[7]:" run. textContent, not
# innerText: JupyterLab skips rendering the cells out of view (CSS content-visibility), and their innerText is empty.
PROMPTS = "ps => ps.map(p => p.textContent.trim())"
ALL_RUN = """n => {
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent.trim());
  const idle = [...document.querySelectorAll('.jp-StatusBar-TextItem')].some(e => /\\| Idle$/.test(e.textContent.trim()));
  return idle && prompts.length === n && !prompts.some(t => t.includes('*')) && prompts.some(t => /\\[\\d+\\]/.test(t));
}"""
# the status bar's kernel item, "<kernel name> | Idle" once the kernel is started, connected and waiting
KERNEL_IDLE = re.compile(r"\| Idle$")


def test_chapter_runs_in_jupyterlab(browser, lab):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    remote, errors = [], []
    def refuse(route):
        remote.append(route.request.url)
        route.abort()
    page.route(lambda url: not url.startswith(lab.url + "/"), refuse)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{lab.url}/lab/tree/{CHAPTER}?token={lab.token}")
        # the notebook open, its kernel started and idle
        page.locator(".jp-StatusBar-TextItem", has_text=KERNEL_IDLE).wait_for(timeout=START_S * 1000)
        # JupyterLab attaches a long notebook's cells a batch at a time: all of them, before running them
        code_cells = sum(c["cell_type"] == "code" for c in json.loads((lab.root / CHAPTER).read_text())["cells"])
        page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-CodeCell').length === n", arg=code_cells)
        kernels = lab.kernels()
        assert len(kernels) == 1, f"JupyterLab runs {len(kernels)} kernels, not the chapter's one:\n{lab.log()}"
        assert _cmdline(kernels[0])[0] == sys.executable, \
            f"the chapter's kernel runs {_cmdline(kernels[0])}, not this environment's {sys.executable}"

        # Run > Run All Cells, from the menu bar, as a reader does
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-content .lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        page.wait_for_function(ALL_RUN, arg=code_cells, timeout=RUN_ALL_S * 1000, polling=250)

        stderr = page.locator('.jp-Notebook [data-mime-type="application/vnd.jupyter.stderr"]').evaluate_all(
            "es => es.map(e => e.textContent)")
        failures = [t for t in stderr if re.search(r"Traceback|\w+Error\b", t)]
        assert not failures, f"{CHAPTER} fails in JupyterLab:\n" + "\n\n".join(failures)
        prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt").evaluate_all(PROMPTS)
        unrun = [i for i, p in enumerate(prompts) if not re.fullmatch(r"\[\d+\]:", p)]
        assert not unrun, f"code cells {unrun} of {CHAPTER} did not run (prompts {[prompts[i] for i in unrun]})"

        # the graph widget drawn by its script inside the output area, and answering clicks
        widget = page.locator('.jp-OutputArea-output div.mytorch-widget[data-widget="graph"]')
        assert widget.count() == 1, f"{CHAPTER} shows {widget.count()} graph widgets after running, not 1"
        widget.scroll_into_view_if_needed()
        widget.locator(".mt-node").first.wait_for()
        check_graph(widget)
        SHOTS.mkdir(parents=True, exist_ok=True)
        widget.screenshot(path=SHOTS / f"lab-{Path(CHAPTER).stem}-graph.png")

        assert not errors, "JavaScript errors in JupyterLab:\n" + "\n".join(errors)
        assert not remote, f"requests that leave the machine: {remote}"
    except Exception:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / f"lab-{Path(CHAPTER).stem}-failure.png")
        raise
    finally:
        page.close()
