"""Figures are saved where the command says they are."""

from __future__ import annotations

import re
import sys

import pytest

from pll_harness.tools.plotting import pyplot, save_figure


def figure():
    fig, axis = pyplot().subplots()
    axis.plot([0, 1], [1, 0])
    return fig


def test_a_name_without_suffix_is_reported_as_the_png_written(tmp_path):
    saved = save_figure(figure(), tmp_path / "plot")
    assert saved == tmp_path / "plot.png" and saved.is_file()
    assert not (tmp_path / "plot").exists()
    assert save_figure(figure(), tmp_path / "a" / "b.pdf").read_bytes().startswith(b"%PDF")


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match="is a folder; give the plot a file name"):
        save_figure(figure(), tmp_path)


def test_without_matplotlib_the_error_installs_as_the_docs_do(monkeypatch):
    """The README and docs/tools.md install the tools extra from the checkout;
    'pll-harness[tools]' would send pip to a package index for it instead."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=re.escape("pip install '.[tools]'")) as error:
        pyplot()
    assert "pll-harness[tools]" not in str(error.value)
