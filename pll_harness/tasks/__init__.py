"""lm-eval task configs for minimal pairs, and the Python they call.

This folder is lm-eval's include path for pll_harness (see :mod:`pll_harness.task_paths`):
every ``*.yaml`` under it is indexed.  It is also an importable package so that the YAML
templates can name their functions by dotted path (``pll_harness.tasks.minimal_pairs``);
that keeps a template usable when a user's own YAML ``include``s it from another folder.
"""
