# Sphinx configuration for the offline book. `docs/build.py` stages the processed notebooks
# in _build/src/ and runs Sphinx with this directory as the configuration directory.
import tomllib
from pathlib import Path

_here = Path(__file__).resolve().parent
_nbdev = tomllib.loads((_here.parent / "pyproject.toml").read_text())["tool"]["nbdev"]

project = _nbdev.get("title", "MyTorch")
html_title = project
language = "en"
root_doc = "index"

extensions = [
    "myst_nb",
    "sphinx-mathjax-offline",  # copies MathJax 3 into _static/mathjax and points mathjax_path at it
]

# Notebooks keep the outputs they were saved with; the site never runs them.
nb_execution_mode = "off"
# myst-nb would otherwise add require.js and the ipywidgets HTML manager from a CDN.
nb_ipywidgets_js = {}
nb_merge_streams = True
# Markdown outputs (show_doc, `#| output: asis`) get the same MyST syntax as cells, math included.
nb_render_markdown_format = "myst"

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "attrs_block", "deflist"]
myst_dmath_double_inline = True  # `$$...$$` inside a paragraph, as Jupyter renders it
myst_heading_anchors = 3  # `[see](#some-heading)` and `[see](00_scalar.ipynb#some-heading)` links

html_theme = "furo"
html_theme_options = {
    "navigation_with_keys": True,
    "top_of_page_buttons": [],  # no "edit this page" / "view source" links
}
html_static_path = [str(_here / "_static")]
html_css_files = ["book.css"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_permalinks_icon = "#"
# The search page would fetch every hit's page for a summary, which browsers refuse from file://
html_show_search_summary = False

# Headings in show_doc output start at H3 under the chapter's H1: a style choice, not an error.
suppress_warnings = ["myst.header"]
html_show_copyright = False


def setup(app):
    # MathJax on every page, not only on pages whose body has math: chapter titles with math
    # also appear in the sidebar and in the previous/next links of other pages.
    app.set_html_assets_policy("always")
