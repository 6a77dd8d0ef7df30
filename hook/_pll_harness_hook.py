"""Make lm-eval versions without plugin entry points find pll_harness's model and tasks.

pyproject.toml declares ``pll-mlm`` in the ``lm_eval.models`` entry-point group and the
task package in ``lm_eval.tasks``.  lm-eval reads those groups itself once it has plugin
support (models: EleutherAI/lm-evaluation-harness#4013; tasks: #4015); lm-eval 0.4.13 does
not.  A ``.pth`` file calls :func:`install` at interpreter start, which adds one import
watcher to ``sys.meta_path`` and nothing else (no torch, no lm_eval, no pll_harness).  When
lm-eval imports ``lm_eval.models`` or ``lm_eval.tasks.manager``, the watcher hands it this
distribution's own entry points, unless that lm-eval reads them itself, in which case it
does nothing.

Four jobs have no entry-point equivalent in any lm-eval version and are always done: task
YAMLs may ``include: pll_harness:<template>.yaml`` (lm-eval resolves an include only
relative to the including file, so a user's YAML could otherwise reach an installed
template only by its absolute path), the included files that lm-eval's task index parses
again for every YAML that includes them are parsed once (:func:`_memoize_includes`), a
pair task's YAML given to ``--tasks`` by its path tells the task's loader where it lies
(:func:`_record_pair_task_yamls`), and ``--metadata`` keys that name a pair loader's
options stay out of its call (:func:`_keep_pair_options_out_of_metadata`).
"""

import sys

# Everything else is imported where it is used, and annotations are strings: this module is
# imported at every interpreter start, where even `typing` or `importlib.abc` would cost
# milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.metadata import EntryPoint
    from pathlib import Path
    from types import ModuleType

DISTRIBUTION = "pll-harness"
MODELS_GROUP = "lm_eval.models"
TASKS_GROUP = "lm_eval.tasks"
TEMPLATE_PREFIX = "pll_harness:"
PAIR_LOADERS_MODULE = "pll_harness.tasks.minimal_pairs"


def entry_points(group: str) -> "list[EntryPoint]":
    """This distribution's entry points in ``group`` (other packages' are not ours to add)."""
    from importlib.metadata import distribution

    return [ep for ep in distribution(DISTRIBUTION).entry_points if ep.group == group]


def reads_model_entry_points(registry: "ModuleType") -> bool:
    """Whether this lm-eval registers ``lm_eval.models`` entry points itself (#4013)."""
    return hasattr(registry, "load_plugins")


def reads_task_entry_points(manager: "ModuleType") -> bool:
    """Whether this lm-eval scans ``lm_eval.tasks`` entry points itself (#4015)."""
    return hasattr(manager, "discover_plugin_task_paths")


def task_folders() -> "list[Path]":
    """The folder of each ``lm_eval.tasks`` entry point's package, found as lm-eval finds it."""
    import importlib.util
    from pathlib import Path

    folders = []
    for ep in entry_points(TASKS_GROUP):
        spec = importlib.util.find_spec(ep.value.partition(":")[0].strip())
        if spec is not None and spec.submodule_search_locations:
            folders.append(Path(next(iter(spec.submodule_search_locations))).resolve())
    return folders


def with_task_folders(include_path: "str | Path | list | tuple | None") -> list:
    """``include_path`` as a list, with each of our task folders appended unless present."""
    from pathlib import Path

    if include_path is None:
        paths: list = []
    elif isinstance(include_path, (list, tuple)):
        paths = list(include_path)
    else:
        paths = [include_path]
    given = {Path(p).resolve() for p in paths}
    return paths + [folder for folder in task_folders() if folder not in given]


def _register_models(models: "ModuleType") -> None:
    from lm_eval.api import registry

    if reads_model_entry_points(registry):
        return
    for ep in entry_points(MODELS_GROUP):
        if ep.name not in registry.model_registry:
            # A "module:Class" string, which lm-eval 0.4.13 imports on first use and
            # upgrades to the class when its @register_model decorator runs.
            registry.model_registry.register(ep.name, target=ep.value)


def _add_task_folders(manager: "ModuleType") -> None:
    if reads_task_entry_points(manager):
        return
    original_init = manager.TaskManager.__init__

    def __init__(self, *args, include_path=None, **kwargs):
        original_init(self, *args, include_path=with_task_folders(include_path), **kwargs)

    manager.TaskManager.__init__ = __init__


def _resolve_template_includes(yaml_loader: "ModuleType") -> None:
    """``load_yaml`` calls itself for each include through the module global, so wrapping
    that global covers every include."""
    original = yaml_loader.load_yaml

    def load_yaml(path, *args, **kwargs):
        import os

        # lm-eval's index loads 27,000 YAMLs a run, and a Path of each cost 0.29 s of every
        # lm-eval run in this environment, whatever the model: a substring test comes first.
        if TEMPLATE_PREFIX in os.fspath(path):
            from pathlib import Path

            name = Path(path).name
            if name.startswith(TEMPLATE_PREFIX):
                from pll_harness.task_paths import TEMPLATE_DIR

                path = TEMPLATE_DIR / name[len(TEMPLATE_PREFIX) :]
                if not path.is_file():
                    _warn_unknown_template(path)
        return original(path, *args, **kwargs)

    yaml_loader.load_yaml = load_yaml


_unknown_templates: "set[str]" = set()


def _warn_unknown_template(path: "Path") -> None:
    """lm-eval's task index drops a YAML whose include fails to load without a word, and
    the run then ends in "Tasks not found": say which template name is wrong, once."""
    if path.name in _unknown_templates:
        return
    _unknown_templates.add(path.name)
    import logging

    known = ", ".join(sorted(p.name for p in path.parent.glob("*.yaml")))
    logging.getLogger("lm_eval.pll_harness.hook").warning(
        "include: %s%s names no template of pll_harness (they are: %s); a task that "
        "includes it is not loaded: lm-eval reports it as not found, or, where --tasks "
        "names the YAML file by its path, stops with a FileNotFoundError.",
        TEMPLATE_PREFIX,
        path.name,
        known,
    )


def _memoize_includes(yaml_loader: "ModuleType", settled_s: float = 2.0) -> None:
    """Parse each included YAML once per process, not once per file that includes it.

    lm-eval indexes every task folder at each start (``TaskIndex.build``), loading each YAML
    with its includes merged in: 26,600 loads a run for 14,000 files, of which 11,900 are
    the same 670 shared templates again, each resolved (an ``lstat`` per path component),
    opened and parsed anew; 2-3 s of lm-eval's 6-8 s index on a 2-core machine, whatever
    the model (bench/README.md).  Only loads that lm-eval makes for an include (those given
    ``_seen``) with functions left unresolved (the index's; a resolved load imports a
    module that lm-eval may reload when it changes) are kept.

    A kept load gives what lm-eval's would while its files are as they were: a deep copy of
    the parsed dict (callers pop keys from it), and lm-eval's include-cycle check: ``_seen``
    collects every file an include tree visits (so lm-eval refuses a file included twice
    through two others as a cycle), and a kept load adds the files its tree visited, or lets
    lm-eval load it, and refuse it, when one of them was visited already. "As they were" is
    each file's ``stat`` (following links: device, inode, size, modification and change
    times, which a ``chmod`` or a restored modification time moves), for every path of the
    tree both as the YAMLs name it and as lm-eval resolved it, so that a link led elsewhere
    also counts. A load whose files changed less than ``settled_s`` before their ``stat`` is
    not kept (as git treats such "racy" files): a save between lm-eval's read and that
    ``stat``, or within one tick of a coarse clock, would otherwise go unseen.
    """
    import copy
    import os
    import threading
    import time
    from collections import namedtuple

    Kept = namedtuple("Kept", "cfg visited files signature")
    original = yaml_loader.load_yaml
    kept: dict = {}
    # For each load of this thread still running, the paths that the loads inside it name.
    local = threading.local()
    settled_ns = int(settled_s * 1e9)

    def signature(files):
        try:
            stats = [os.stat(path) for path in files]
        except OSError:
            return None
        return [(s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in stats]

    def settled(stats) -> bool:
        changed = max(max(stat[3:]) for stat in stats)
        return changed < time.time_ns() - settled_ns

    def load_yaml(path, *args, **kwargs):
        seen = kwargs.get("_seen")
        if args or seen is None or kwargs.get("resolve_func", True):
            return original(path, *args, **kwargs)
        given = os.path.abspath(path)
        key = (given, bool(kwargs.get("recursive", True)))
        stack = local.__dict__.setdefault("stack", [])
        entry = kept.get(key)
        if (
            entry is None
            or not entry.visited.isdisjoint(seen)
            or signature(entry.files) != entry.signature
        ):
            kept.pop(key, None)
            before = set(seen)
            stack.append([])
            try:
                cfg = original(path, *args, **kwargs)
            finally:
                named = stack.pop()
            visited = frozenset(seen - before)
            files = tuple(dict.fromkeys([given, *named, *map(os.fspath, visited)]))
            entry = Kept(cfg, visited, files, signature(files))
            if entry.signature is not None and settled(entry.signature):
                kept[key] = entry
        else:
            seen.update(entry.visited)
        if stack:
            stack[-1].extend(entry.files)
        return copy.deepcopy(entry.cfg)

    yaml_loader.load_yaml = load_yaml


def _record_pair_task_yamls(yaml_loader: "ModuleType") -> None:
    """Note in a pair task's config the YAML file that lm-eval loaded it from.

    For ``--tasks path/to/task.yaml`` (or a folder) lm-eval loads the YAML itself, with its
    functions resolved, hands the task over as a dict and tells the task's loader only that
    it is "inline": relative ``data_files`` would be looked for in the cwd, not beside the
    YAML.  Only loads at the top (no ``_seen``: not an include) with functions resolved are
    looked at, and only once the pair loaders' module is imported (a resolved load of a
    pair task imports it); ``record_task_yaml`` leaves every other task's config alone.
    """
    original = yaml_loader.load_yaml

    def load_yaml(path, *args, **kwargs):
        cfg = original(path, *args, **kwargs)
        if kwargs.get("_seen") is None and kwargs.get("resolve_func", True):
            pairs = sys.modules.get(PAIR_LOADERS_MODULE)
            if pairs is not None:
                pairs.record_task_yaml(cfg, path)
        return cfg

    yaml_loader.load_yaml = load_yaml


def _wrap_yaml_loader(yaml_loader: "ModuleType") -> None:
    """Templates by name outside the kept includes, so that a template's load is kept under
    its real path; the pair tasks' YAMLs noted outermost, as the caller named them."""
    _memoize_includes(yaml_loader)
    _resolve_template_includes(yaml_loader)
    _record_pair_task_yamls(yaml_loader)


def _keep_pair_options_out_of_metadata(task_config: "ModuleType") -> None:
    """lm-eval hands a task's loader its metadata, which holds every ``--metadata`` and
    ``--model_args`` key of the run, beside its ``dataset_kwargs``: a key that names a pair
    loader's option would break or redirect it.  Each ``TaskConfig`` is looked at as lm-eval
    builds it, once the pair loaders' module is imported (resolving a pair task's
    ``custom_dataset`` imports it); ``keep_options_out_of_metadata`` leaves every other
    task's config alone."""
    cls = getattr(task_config, "TaskConfig", None)
    original = getattr(cls, "__post_init__", None)
    if original is None:  # an lm-eval that builds its task configs elsewhere
        return

    def __post_init__(self) -> None:
        original(self)
        pairs = sys.modules.get(PAIR_LOADERS_MODULE)
        if pairs is not None:
            pairs.keep_options_out_of_metadata(self)

    cls.__post_init__ = __post_init__


_AFTER_IMPORT: "dict[str, Callable[[ModuleType], None]]" = {
    "lm_eval.models": _register_models,
    "lm_eval.tasks.manager": _add_task_folders,
    "lm_eval.tasks._yaml_loader": _wrap_yaml_loader,
    "lm_eval.config.task": _keep_pair_options_out_of_metadata,
}


class _ExecThenCall:
    """The real loader, plus our callback on the module it has just executed."""

    def __init__(self, loader, callback: "Callable[[ModuleType], None]"):
        self._loader = loader
        self._callback = callback

    def __getattr__(self, name: str):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: "ModuleType") -> None:
        self._loader.exec_module(module)
        self._callback(module)


class _Watcher:
    """A ``sys.meta_path`` finder that answers only for the modules in _AFTER_IMPORT."""

    def find_spec(self, fullname, path, target=None):
        callback = _AFTER_IMPORT.get(fullname)
        if callback is None:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _ExecThenCall(spec.loader, callback)
        return spec


def install() -> None:
    """Add the watcher once; modules of lm-eval already imported are handled right away."""
    if any(isinstance(finder, _Watcher) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _Watcher())
    for name, callback in _AFTER_IMPORT.items():
        if name in sys.modules:
            callback(sys.modules[name])
