"""Build the offline book (_site/) and README.md from the notebooks in nbs/, without Quarto.

    .venv/bin/python docs/build.py [REPO_ROOT]      (REPO_ROOT defaults to the current directory)

1. nbdev's `proc_nbs` writes processed notebooks to _proc/ (show_doc cells run, `#| hide` and
   `#| export` cells dropped, the title cell turned into YAML frontmatter).
2. Each processed notebook is staged in _build/src/ as Sphinx + myst-nb want it: the frontmatter
   becomes a `# Title` cell again, the remaining `#|` directive lines are removed (the Quarto
   ones become myst-nb tags), and links to the hosted docs point at the local pages.
3. Sphinx renders _build/src/ into _site/ with docs/conf.py; any Sphinx warning fails the build.
4. README.md is written from the processed nbs/index.ipynb with nbconvert.
"""
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
import yaml

DOCS = Path(__file__).resolve().parent
BUILD, SRC, SITE = Path("_build"), Path("_build/src"), Path("_site")
RE_DIRECTIVE = re.compile(r"^\s*#\|\s*([\w-]+)\s*:?\s*(.*?)\s*$")
RE_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
RE_ATTR_LINK = re.compile(r"\[([^\]]+)\]\((\S+?)\)\{[^}]*\}")
RE_RULE = re.compile(r"^\s*(---+|\*\*\*+|___+)\s*$", re.M)
CELL_KEYS = {"cell_type", "id", "metadata", "source", "outputs", "execution_count", "attachments"}
# Quarto cell options that nbdev leaves in processed notebooks, as myst-nb tags.
QUARTO_TAGS = {("echo", "false"): "remove-input", ("output", "false"): "remove-output",
               ("include", "false"): "remove-cell", ("code-fold", "true"): "hide-input"}


def log(msg): print(f"[book] {msg}", flush=True)


def split_directives(source):
    "Directives `{name: value}` from the leading `#|` lines of a code cell, and the code after them."
    lines = source.splitlines()
    dirs = {}
    while lines and (m := RE_DIRECTIVE.match(lines[0])):
        dirs[m[1]] = m[2].strip("\"'").lower()
        lines.pop(0)
    return dirs, "\n".join(lines).strip("\n")


def title_cell(fm, default):
    "The chapter heading nbdev's FrontmatterProc turned into YAML, as markdown again."
    md = f"# {fm.get('title') or default}"
    if fm.get("description"): md += f"\n\n> {fm['description']}"
    return nbformat.v4.new_markdown_cell(md)


def stage_notebook(nb, stem, local_links):
    "Rewrite a processed notebook in place for myst-nb."
    fm = {}
    first = nb.cells[0] if nb.cells else None
    if first is not None and first.cell_type == "raw" and first.source.lstrip().startswith("---"):
        fm = yaml.safe_load(first.source.strip().strip("-")) or {}
        nb.cells.pop(0)
    cells = [title_cell(fm, stem)]
    for cell in nb.cells:
        # nbdev's bookkeeping (`has_sd`, execnb's timings) is not valid nbformat
        for key in set(cell) - CELL_KEYS: del cell[key]
        cell.metadata.pop("execution", None)
        if cell.cell_type == "markdown":
            cell.source = local_links(cell.source)
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        dirs, cell.source = split_directives(cell.source)
        tags = [t for (k, v), t in QUARTO_TAGS.items() if dirs.get(k) == v]
        if not cell.source:
            if not cell.get("outputs"): continue
            tags.append("remove-input")
        if cell.source.startswith("show_doc("): tags.append("show-doc")  # styled as a box in book.css
        if dirs.get("output") == "asis":  # printed text is markdown to render, as Quarto does
            for i, out in enumerate(cell.get("outputs", [])):
                if out.output_type == "stream" and out.name == "stdout":
                    cell.outputs[i] = nbformat.v4.new_output("display_data", {"text/markdown": out.text})
        for out in cell.get("outputs", []):
            if "text/markdown" in out.get("data", {}):
                # show_doc opens with a `---` rule, which docutils allows only between sections, and
                # gives its source link Pandoc attributes, which MyST does not read
                md = RE_RULE.sub("", out.data["text/markdown"])
                md = RE_ATTR_LINK.sub(r'<a class="reference external showdoc-source" href="\2">\1</a>', md)
                out.data["text/markdown"] = local_links(md)
        if tags: cell.metadata["tags"] = sorted(set(cell.metadata.get("tags", [])) | set(tags))
        cells.append(cell)
    nb.cells = cells
    # nbdev-clean keeps only the kernelspec; the language names the code blocks' highlighting
    nb.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
    nb.metadata.setdefault("language_info", {"name": nb.metadata.kernelspec.get("language", "python")})
    return nb


def link_rewriter(proc, pages):
    """Links that nbdev's `add_links` points at the hosted docs, e.g.
    [`Value.backward`](https://mytorch-book.github.io/mytorch/scalar.html#value.backward),
    rewritten to this site's page and to the id docutils gives the heading there
    (00_scalar.html#value-backward), or to the page alone when nothing on it documents the name
    (a private helper). They are written as HTML: MyST would look for a document named
    `00_scalar.html` and report it missing."""
    from docutils.nodes import make_id
    from nbdev.config import get_config
    cfg = get_config()
    host = (cfg.get("doc_host") or "").rstrip("/")
    if not host: return lambda s: s
    base = (cfg.get("doc_baseurl") or "/").strip("/")
    prefix = f"{host}/{base}/" if base else f"{host}/"
    out_files, anchors = {}, {}
    for stem in pages:
        nb = nbformat.read(proc / f"{stem}.ipynb", as_version=4)
        src = nb.cells[0].source if nb.cells and nb.cells[0].cell_type == "raw" else ""
        if m := re.search(r"^output-file:\s*(\S+)\s*$", src, re.M): out_files[m[1]] = f"{stem}.html"
        texts = [c.source for c in nb.cells if c.cell_type == "markdown"]
        texts += [o.data["text/markdown"] for c in nb.cells for o in c.get("outputs", [])
                  if "text/markdown" in o.get("data", {})]
        anchors[f"{stem}.html"] = {make_id(h) for t in texts for h in RE_HEADING.findall(t)}
    pat = re.compile(r"\[(`[^`]+`)\]\(" + re.escape(prefix) + r"([\w./-]+\.html)(?:#([^)\s]*))?\)")

    def local(m):
        if m[2] not in out_files: return m[0]
        page = out_files[m[2]]
        anchor = make_id(m[3] or "")
        href = f"{page}#{anchor}" if anchor in anchors[page] else page
        return f'<a class="reference internal" href="{href}">{m[1]}</a>'
    return lambda s: pat.sub(local, s)


def stage(proc):
    "Copy _proc/ to _build/src/ as Sphinx sources; return the chapter names in book order."
    shutil.rmtree(SRC, ignore_errors=True)
    SRC.mkdir(parents=True)
    nbs = sorted(p.relative_to(proc) for p in proc.rglob("*.ipynb")
                 if not any(part.startswith((".", "_")) for part in p.relative_to(proc).parts))
    pages = [p.with_suffix("").as_posix() for p in nbs]
    local_links = link_rewriter(proc, pages)
    for f in proc.rglob("*"):
        rel = f.relative_to(proc)
        if f.is_dir() or any(part.startswith(".") for part in rel.parts): continue
        dst = SRC / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if rel in nbs:
            nb = stage_notebook(nbformat.read(f, as_version=4), rel.stem, local_links)
            nbformat.write(nb, dst)
        elif f.suffix not in (".md", ".qmd", ".yml", ".yaml", ".py"):
            shutil.copy2(f, dst)  # images and other files the notebooks refer to
    return pages


def add_toctree(chapters):
    "Put the chapters in the home page's (hidden) toctree: the sidebar and prev/next links follow it."
    toc = "```{toctree}\n:hidden:\n:maxdepth: 1\n:titlesonly:\n\n" + "\n".join(chapters) + "\n```"
    index = SRC / "index.ipynb"
    if index.exists():
        nb = nbformat.read(index, as_version=4)
        nb.cells.append(nbformat.v4.new_markdown_cell(toc))
        nbformat.write(nb, index)
    else:
        from nbdev.config import get_config
        (SRC / "index.md").write_text(f"# {get_config().get('title', 'Contents')}\n\n{toc}\n")


def sphinx_build():
    from sphinx.cmd.build import build_main
    shutil.rmtree(SITE, ignore_errors=True)  # no pages left over from a notebook that is gone
    # -E: read every page afresh, so a warning is reported on every build, not only the first
    args = ["-b", "html", "-q", "-E", "-W", "-c", str(DOCS), "-d", str(BUILD / "doctrees"), str(SRC), str(SITE)]
    return build_main(args)


def write_readme(proc):
    """README.md from the home page: code, text and markdown outputs; no images, HTML or JavaScript.
    Links to notebooks point into nbs/, where GitHub shows them."""
    from nbconvert import MarkdownExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    from nbdev.config import get_config
    doc_url = re.escape((get_config().get("doc_url") or "").rstrip("/") or "\0")
    def to_nbs(md):
        md = re.sub(r"\]\((?![\w+.-]+:|[#/])([^)\s]+\.ipynb(?:#[^)\s]*)?)\)", r"](nbs/\1)", md)
        # nbdev links names to the hosted docs; the README shows them as plain code instead
        return re.sub(r"\[(`[^`]+`)\]\(" + doc_url + r"[^)\s]*\)", r"\1", md)
    nb = stage_notebook(nbformat.read(proc / "index.ipynb", as_version=4), "index", to_nbs)
    keep = ("text/markdown", "text/plain", "text/latex")
    for cell in nb.cells:
        if cell.cell_type != "code": continue
        outs = []
        for out in cell.outputs:
            if "data" in out:
                if any(k.startswith("image/") or k == "text/html" for k in out.data): continue
                out.data = {k: v for k, v in out.data.items() if k in keep}
                if not out.data: continue
            outs.append(out)
        cell.outputs = outs
    tags = TagRemovePreprocessor(remove_cell_tags={"remove-cell"}, remove_input_tags={"remove-input"},
                                 remove_all_outputs_tags={"remove-output"})
    nb, _ = tags.preprocess(nb, {})
    body, _ = MarkdownExporter(exclude_raw=True).from_notebook_node(nb)
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    Path("README.md").write_text(body, encoding="utf-8")


def _book_cells_to_run():
    """Narrow which cells nbdev runs while processing (to render `show_doc`): never a cell carrying
    a test flag (`#| torch` needs PyTorch, which `make book` does not install; its saved outputs
    are shown), and never a lesson cell that mixes an import with other code (such a cell needs
    the cells before it, which are not run). Exported cells, show_doc cells and cells of imports
    alone still run, which is all that show_doc needs."""
    import ast
    import nbdev.processors as procs
    from nbdev.config import get_config
    flags = set(str(get_config().get("tst_flags", "")).split())
    nbdev_do_eval = procs._do_eval

    def do_eval(cell):
        if flags & set(getattr(cell, "directives_", {}) or {}): return False
        if cell.cell_type == "code" and not ({"export", "exports", "exporti"} & set(cell.directives_ or {})):
            trees = cell.parsed_() or []
            imports = [isinstance(t, (ast.Import, ast.ImportFrom)) for t in trees]
            if any(imports) and not all(imports): return False
        return nbdev_do_eval(cell)
    procs._do_eval = do_eval


def main(root="."):
    import os
    os.chdir(root)
    from nbdev.serve import proc_nbs
    _book_cells_to_run()
    t0 = time.perf_counter()
    try:
        proc = proc_nbs(n_workers=0)  # in this process, so that the narrowing above applies
    except Exception as e:
        sys.exit(f"[book] nbdev could not process the notebooks: {e}\n[book] To render show_doc, nbdev runs "
                 "every exported cell, every show_doc cell and every cell that contains an import. A cell "
                 "that mixes an import with code needing earlier cells fails there: put the import in a "
                 "cell of its own (nbdev FAQ).")
    log(f"processed notebooks into {proc.name}/ ({time.perf_counter() - t0:.1f}s)")
    t = time.perf_counter()
    pages = stage(proc)
    if not pages: sys.exit("[book] no notebooks found in _proc/")
    chapters = [p for p in pages if p != "index"]
    add_toctree(chapters)
    log(f"staged {len(pages)} pages in {SRC}/: {', '.join(pages)}")
    status = sphinx_build()
    if status:
        sys.exit(f"[book] Sphinx failed (status {status}): fix the warnings above")
    log(f"rendered {SITE}/index.html and {len(chapters)} chapter pages ({time.perf_counter() - t:.1f}s)")
    if (proc / "index.ipynb").exists():
        write_readme(proc)
        log("wrote README.md from nbs/index.ipynb")
    log(f"done in {time.perf_counter() - t0:.1f}s: open {SITE.resolve() / 'index.html'}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
