"""Sphinx configuration for rlpace's documentation site.

Build it the way CI does with ``make docs`` (``docs/build.py``): HTML and the page
examples (doctest builder) with warnings as errors and nitpicky cross-references, then
a check of every internal link in the built HTML.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "lib"))
sys.path.insert(0, str(HERE / "_ext"))

# Examples and autodoc import the package: keep them single-threaded, quiet and offline.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import rlpace  # noqa: E402

project = "rlpace"
author = "the rlpace developers"
copyright = "2026, the rlpace developers"  # noqa: A001 - Sphinx reads this name
release = rlpace.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "rlpace_docs",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "examples", "Thumbs.db", ".DS_Store"]

# -- MyST ---------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist", "fieldlist", "attrs_inline"]
myst_heading_anchors = 3

# -- autodoc / autosummary / napoleon -------------------------------------------------
# The API pages are written by the rlpace_docs extension (one page per public module);
# autosummary only draws their summary tables.
autosummary_generate = False
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "class"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_attr_annotations = True

# -- nitpicky cross-references --------------------------------------------------------
# ``-n`` turns every unresolved reference into a warning (an error under ``-W``): that
# is the internal link check for the API. There is no network for intersphinx, so
# references that point outside rlpace (builtins, typing, torch, tensordict, pandas…)
# are accepted unresolved; references into rlpace must resolve.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(?!rlpace\b).*")]

# -- doctest builder ------------------------------------------------------------------
# The pages' ``{doctest}``/``{testcode}`` examples run here. Docstring examples of the
# package run under pytest (``--doctest-modules``), so the builder skips plain ``>>>``
# blocks that autodoc pulls in from docstrings.
doctest_test_doctest_blocks = ""
doctest_global_setup = """
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
"""

# -- HTML -----------------------------------------------------------------------------
html_theme = "furo"
html_title = f"rlpace {release}"
html_static_path = ["_static"]
html_show_sourcelink = False
html_theme_options = {"navigation_with_keys": True}
