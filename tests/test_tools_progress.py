"""The tools' progress bar."""

from __future__ import annotations

from pll_harness.tools.progress import scoring_bar


def test_the_bar_says_what_it_scores_and_what_was_done_before(capsys):
    assert scoring_bar(False, 10, "sent×metric") is None
    for what, done, desc in (
        ("", 0, "scoring"),
        ("words", 0, "scoring words"),
        ("", 3, "scoring (3 already done)"),
    ):
        bar = scoring_bar(True, 10, "item×metric", what, done)
        assert (bar.desc, bar.total, bar.unit) == (desc, 10, "item×metric")
        bar.close()
    assert "scoring" in capsys.readouterr().err
