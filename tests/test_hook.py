"""The plugin entry points and the start-up hook that stands in for them where lm-eval does
not read them (hook/_pll_harness_hook.py, as installed).

The installed lm-eval takes one of two paths, checked for real in a fresh interpreter; the
other path's logic is checked here on stand-in modules: the hook stays out of the way of an
lm-eval that reads entry points itself, and our entry points resolve the way such an lm-eval
resolves them (EleutherAI/lm-evaluation-harness#4013 for models, #4015 for tasks).
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import logging
import os
import random
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace

import _pll_harness_hook as hook
import pytest
from lm_eval.api.registry import Registry
from lm_eval_runs import run_checked

from pll_harness.lm import PLLMaskedLM
from pll_harness.task_paths import TASK_DIR, TEMPLATE_DIR


def fresh_python(code: str, tmp_path: Path, *flags: str) -> str:
    return run_checked([sys.executable, *flags, "-c", code], tmp_path).stdout.strip()


def test_entry_points_name_the_model_and_the_task_folder():
    (model,) = hook.entry_points(hook.MODELS_GROUP)
    assert (model.name, model.load()) == ("pll-mlm", PLLMaskedLM)
    # lm-eval registers the entry point, then the class's own @register_model("pll-mlm")
    # replaces it; #4013 accepts that only when both name the same "module:Class".
    assert model.value == f"{PLLMaskedLM.__module__}:{PLLMaskedLM.__name__}"
    # #4015 scans the folder of the entry point's package, found by importlib.util.find_spec.
    assert hook.task_folders() == [TASK_DIR]


def test_start_up_imports_only_the_hook(tmp_path):
    """The .pth file is installed and runs the hook; the hook itself imports nothing
    (checked without site, so that no other start-up file hides what it imports)."""
    code = (
        "import sys; print(sorted(m for m in ('_pll_harness_hook', 'torch', 'lm_eval', "
        "'pll_harness', 'transformers') if m in sys.modules))"
    )
    out = fresh_python(code, tmp_path)
    assert out == "['_pll_harness_hook']", (
        f"{out}: install the package (pip install .) so that its start-up hook is active"
    )
    folder = str(Path(hook.__file__).parent)
    code = (
        f"import sys; sys.path.append({folder!r}); before = set(sys.modules); "
        "import _pll_harness_hook; _pll_harness_hook.install(); "
        "print(sorted(set(sys.modules) - before))"
    )
    assert fresh_python(code, tmp_path, "-S") == "['_pll_harness_hook']"


def test_the_installed_lm_eval_takes_one_path(tmp_path):
    """Where lm-eval reads entry points the hook leaves its registry and TaskManager alone;
    elsewhere it registers pll-mlm (as a "module:Class" string) and wraps TaskManager."""
    code = (
        "import lm_eval.models, lm_eval.tasks.manager as manager, _pll_harness_hook as hook; "
        "from lm_eval.api import registry; "
        "print(hook.reads_model_entry_points(registry), "
        "type(registry.model_registry._objs['pll-mlm']).__name__, "
        "hook.reads_task_entry_points(manager), manager.TaskManager.__init__.__module__)"
    )
    reads_models, placeholder, reads_tasks, init_module = fresh_python(code, tmp_path).split()
    assert placeholder == ("EntryPoint" if reads_models == "True" else "str")
    assert init_module == ("lm_eval.tasks.manager" if reads_tasks == "True" else hook.__name__)


@pytest.fixture
def registry_module(monkeypatch) -> SimpleNamespace:
    """An empty model registry standing in for lm_eval.api.registry."""
    import lm_eval.api

    stand_in = SimpleNamespace(model_registry=Registry("model"))
    monkeypatch.setattr(lm_eval.api, "registry", stand_in)
    return stand_in


def test_hook_registers_the_model_where_lm_eval_does_not_read_entry_points(registry_module):
    hook._register_models(SimpleNamespace())
    assert registry_module.model_registry.get("pll-mlm") is PLLMaskedLM
    hook._register_models(SimpleNamespace())  # again: no clash with the class now there
    assert list(registry_module.model_registry) == ["pll-mlm"]


def test_hook_leaves_models_to_an_lm_eval_that_reads_entry_points(registry_module):
    registry_module.load_plugins = lambda group, registry: []
    hook._register_models(SimpleNamespace())
    assert "pll-mlm" not in registry_module.model_registry


def stand_in_manager() -> SimpleNamespace:
    class TaskManager:
        def __init__(self, verbosity=None, include_path=None):
            self.include_path = include_path

    return SimpleNamespace(TaskManager=TaskManager)


def test_hook_adds_the_task_folder_where_lm_eval_does_not_read_entry_points():
    manager = stand_in_manager()
    hook._add_task_folders(manager)
    assert manager.TaskManager().include_path == [TASK_DIR]
    assert manager.TaskManager(include_path="mine").include_path == ["mine", TASK_DIR]
    given = [str(TASK_DIR), "mine"]
    assert manager.TaskManager(include_path=given).include_path == given


def test_hook_leaves_tasks_to_an_lm_eval_that_reads_entry_points():
    manager = stand_in_manager()
    manager.discover_plugin_task_paths = list
    original = manager.TaskManager.__init__
    hook._add_task_folders(manager)
    assert manager.TaskManager.__init__ is original


def test_template_includes_by_name():
    loaded = []
    yaml_loader = SimpleNamespace(load_yaml=lambda path, **kwargs: loaded.append(Path(path)))
    hook._resolve_template_includes(yaml_loader)
    yaml_loader.load_yaml("/tasks/pll_harness:minimal_pair.yaml", recursive=True)
    yaml_loader.load_yaml(Path("/tasks/pll_harness:pair_preference.yaml"))
    yaml_loader.load_yaml("/tasks/minimal_pair.yaml")
    yaml_loader.load_yaml(Path("/pll_harness:tasks/minimal_pair.yaml"))  # a folder's name
    assert loaded == [
        TEMPLATE_DIR / "minimal_pair.yaml",
        TEMPLATE_DIR / "pair_preference.yaml",
        Path("/tasks/minimal_pair.yaml"),
        Path("/pll_harness:tasks/minimal_pair.yaml"),
    ]
    assert all(template.is_file() for template in TEMPLATE_DIR.glob("*.yaml"))


def test_an_include_of_no_template_is_named_once(monkeypatch, caplog):
    """lm-eval's index drops the including YAML without a word ("Tasks not found")."""
    monkeypatch.setattr(hook, "_unknown_templates", set())
    yaml_loader = SimpleNamespace(load_yaml=lambda path, **kwargs: None)
    hook._resolve_template_includes(yaml_loader)
    with caplog.at_level(logging.WARNING, logger="lm_eval.pll_harness"):
        yaml_loader.load_yaml("/tasks/pll_harness:minimal_pair.yaml")
        assert caplog.text == ""
        for _ in range(2):
            yaml_loader.load_yaml("/tasks/pll_harness:minimal_pairs.yaml")
    assert caplog.text.count("names no template") == 1
    assert "pll_harness:minimal_pairs.yaml names no template" in caplog.text
    assert "minimal_pair.yaml, pair_preference.yaml, stereotype_pair.yaml" in caplog.text


def lm_eval_yaml_loader(counted: list[Path] | None = None) -> ModuleType:
    """A copy of lm-eval's YAML loader module as lm-eval ships it (the hook wraps the one
    lm-eval imports); with ``counted``, each of its own loads of an include appends the path
    it parses."""
    import lm_eval.tasks._yaml_loader as installed

    spec = importlib.util.spec_from_file_location(f"yaml_loader_{id(counted)}", installed.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if counted is not None:
        parse = module.load_yaml

        def load_yaml(path, *args, **kwargs):
            if kwargs.get("_seen") is not None:
                counted.append(Path(path).resolve())
            return parse(path, *args, **kwargs)

        module.load_yaml = load_yaml
    return module


def outcome(yaml_loader: ModuleType, path: Path, **kwargs) -> tuple:
    """What a load gives: the dict, or the error's type and message."""
    try:
        return ("dict", yaml_loader.load_yaml(path, **kwargs))
    except Exception as error:  # the error is the outcome compared
        return (type(error).__name__, str(error))


@pytest.fixture
def kept_includes() -> tuple[ModuleType, list[Path]]:
    """lm-eval's loader with the hook's kept includes, and the includes it parsed; files
    written a moment ago are kept too (``settled_s=0``), as the tests write theirs."""
    return loader_with_kept_includes(settled_s=0)


def loader_with_kept_includes(**settings) -> tuple[ModuleType, list[Path]]:
    counted: list[Path] = []
    yaml_loader = lm_eval_yaml_loader(counted)
    hook._memoize_includes(yaml_loader, **settings)
    return yaml_loader, counted


INDEX_LOAD = {"resolve_func": False, "recursive": True}  # as lm-eval's TaskIndex.build loads


@pytest.mark.parametrize(
    "folder", ["metabench", "truthfulqa-multi", "eus_exams", "mmlu", "llama3", "okapi"]
)
def test_kept_includes_give_lm_evals_own_index_loads(folder):
    """Folders of lm-eval's own tasks with the most shared includes, and the ones whose
    includes include others, loaded as its index loads them: the same dicts, and each
    include parsed once where lm-eval parses it for every file that includes it, with the
    hook's settings as installed (``bench/task_index.py`` compares the whole index)."""
    import lm_eval.tasks._index as index

    kept, parsed = loader_with_kept_includes()
    loaded: list[Path] = []
    shipped = lm_eval_yaml_loader(loaded)
    files = list(index.TaskIndex._iter_yaml_files(Path(index.__file__).parent / folder))
    for path in files:
        assert outcome(kept, path, **INDEX_LOAD) == outcome(shipped, path, **INDEX_LOAD), path
    assert sorted(parsed) == sorted(set(loaded))
    assert len(parsed) < len(loaded)


def write_yaml(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_kept_includes_are_copies_and_follow_edits(tmp_path, kept_includes):
    kept, counted = kept_includes
    inner = write_yaml(tmp_path / "inner.yaml", "metric_list:\n  - metric: acc\n")
    shared = write_yaml(tmp_path / "shared.yaml", "include: inner.yaml\nnum_fewshot: 0\n")
    first = write_yaml(tmp_path / "first.yaml", "include: shared.yaml\ntask: first\n")
    second = write_yaml(tmp_path / "second.yaml", "include: shared.yaml\ntask: second\n")
    loaded = kept.load_yaml(first, **INDEX_LOAD)
    loaded["metric_list"].append({"metric": "changed by a caller"})
    assert kept.load_yaml(second, **INDEX_LOAD) == {
        "metric_list": [{"metric": "acc"}],
        "num_fewshot": 0,
        "task": "second",
    }
    assert counted.count(shared.resolve()) == 1
    assert counted.count(inner.resolve()) == 1
    write_yaml(inner, "metric_list:\n  - metric: brier_score\n")  # an include's include
    assert kept.load_yaml(second, **INDEX_LOAD)["metric_list"] == [{"metric": "brier_score"}]
    # Another size: the clock of a file's times may not have moved since the last write.
    write_yaml(shared, "include: inner.yaml\nnum_fewshot: 10\n")
    assert kept.load_yaml(first, **INDEX_LOAD)["num_fewshot"] == 10
    assert counted.count(shared.resolve()) == 3
    (tmp_path / "elsewhere").mkdir()
    write_yaml(tmp_path / "elsewhere" / "shared.yaml", "num_fewshot: 1\n")
    shared.unlink()
    shared.symlink_to(tmp_path / "elsewhere" / "shared.yaml")
    assert kept.load_yaml(first, **INDEX_LOAD) == {"num_fewshot": 1, "task": "first"}
    shared.unlink()
    assert outcome(kept, first, **INDEX_LOAD)[0] == "FileNotFoundError"


def test_kept_includes_refuse_what_lm_eval_refuses(tmp_path, kept_includes):
    """lm-eval refuses an include cycle, and also a file that one tree includes twice
    (its ``_seen`` collects every file a tree visits); a kept include changes neither."""
    kept, _ = kept_includes
    shipped = lm_eval_yaml_loader()
    write_yaml(tmp_path / "common.yaml", "num_fewshot: 0\n")
    write_yaml(tmp_path / "left.yaml", "include: common.yaml\n")
    write_yaml(tmp_path / "right.yaml", "include: common.yaml\n")
    write_yaml(tmp_path / "loop_a.yaml", "include: loop_b.yaml\n")
    write_yaml(tmp_path / "loop_b.yaml", "include: loop_a.yaml\n")
    write_yaml(tmp_path / "self.yaml", "include: self.yaml\n")
    write_yaml(tmp_path / "list.yaml", "- not a dict\n")
    write_yaml(tmp_path / "bad_include.yaml", "include: list.yaml\n")
    files = {
        "one side": write_yaml(tmp_path / "one_side.yaml", "include: left.yaml\ntask: a\n"),
        "both sides": write_yaml(tmp_path / "both.yaml", "include: [left.yaml, right.yaml]\n"),
        "loop": tmp_path / "loop_a.yaml",
        "self": tmp_path / "self.yaml",
        "not a dict": tmp_path / "bad_include.yaml",
        "missing": write_yaml(tmp_path / "missing.yaml", "include: nowhere.yaml\n"),
    }
    for _ in range(2):  # the second round meets every include kept
        for case, path in files.items():
            expected = outcome(shipped, path, **INDEX_LOAD)
            assert outcome(kept, path, **INDEX_LOAD) == expected, case
    assert outcome(shipped, files["both sides"], **INDEX_LOAD)[0] == "ValueError"
    assert outcome(shipped, files["one side"], **INDEX_LOAD)[0] == "dict"


def test_an_include_gone_once_parsed_is_not_kept(tmp_path):
    yaml_loader = lm_eval_yaml_loader()
    parse = yaml_loader.load_yaml

    def parse_then_remove(path, *args, **kwargs):
        cfg = parse(path, *args, **kwargs)
        if Path(path).name == "shared.yaml":
            Path(path).unlink()
        return cfg

    yaml_loader.load_yaml = parse_then_remove
    hook._memoize_includes(yaml_loader, settled_s=0)
    write_yaml(tmp_path / "shared.yaml", "num_fewshot: 0\n")
    task = write_yaml(tmp_path / "task.yaml", "include: shared.yaml\n")
    assert outcome(yaml_loader, task, **INDEX_LOAD) == ("dict", {"num_fewshot": 0})
    assert outcome(yaml_loader, task, **INDEX_LOAD)[0] == "FileNotFoundError"


def test_an_include_saved_while_lm_eval_reads_it_is_read_again(tmp_path):
    """A save between lm-eval's read of an include and the hook's ``stat`` of it would
    leave the old dict kept under the new ``stat``: a file changed within ``settled_s`` is
    not kept."""
    yaml_loader = lm_eval_yaml_loader()
    parse = yaml_loader.load_yaml
    shared = write_yaml(tmp_path / "shared.yaml", "num_fewshot: 0\n")
    task = write_yaml(tmp_path / "task.yaml", "include: shared.yaml\n")

    def parse_while_someone_saves(path, *args, **kwargs):
        cfg = parse(path, *args, **kwargs)
        if Path(path).name == "shared.yaml" and cfg == {"num_fewshot": 0}:
            write_yaml(shared, "num_fewshot: 5\n")
        return cfg

    yaml_loader.load_yaml = parse_while_someone_saves
    hook._memoize_includes(yaml_loader)
    assert yaml_loader.load_yaml(task, **INDEX_LOAD) == {"num_fewshot": 0}
    assert yaml_loader.load_yaml(task, **INDEX_LOAD) == {"num_fewshot": 5}


def test_kept_includes_follow_links_inside_the_tree(tmp_path, kept_includes):
    """A link that an include's include goes through, to a file or to a folder, led
    elsewhere: lm-eval reads the new target, and so does a kept include."""
    kept, _ = kept_includes
    for version in ("v1", "v2"):
        (tmp_path / version).mkdir()
        write_yaml(tmp_path / version / "inner.yaml", f"dataset_name: {version}\n")
    write_yaml(tmp_path / "a.yaml", "num_fewshot: 0\n")
    write_yaml(tmp_path / "b.yaml", "num_fewshot: 5\n")
    (tmp_path / "current").symlink_to(tmp_path / "v1")
    (tmp_path / "inner.yaml").symlink_to(tmp_path / "a.yaml")
    write_yaml(tmp_path / "shared.yaml", "include: [inner.yaml, current/inner.yaml]\n")
    task = write_yaml(tmp_path / "task.yaml", "include: shared.yaml\n")
    assert kept.load_yaml(task, **INDEX_LOAD) == {"num_fewshot": 0, "dataset_name": "v1"}
    (tmp_path / "inner.yaml").unlink()
    (tmp_path / "inner.yaml").symlink_to(tmp_path / "b.yaml")
    assert kept.load_yaml(task, **INDEX_LOAD) == {"num_fewshot": 5, "dataset_name": "v1"}
    (tmp_path / "current").unlink()
    (tmp_path / "current").symlink_to(tmp_path / "v2")
    assert kept.load_yaml(task, **INDEX_LOAD) == {"num_fewshot": 5, "dataset_name": "v2"}


def test_kept_includes_see_a_same_size_edit_with_its_old_modification_time(tmp_path, kept_includes):
    """``cp -p``, ``touch -r`` or ``rsync -t`` put an old modification time on new contents
    of the same size; the change time still moves."""
    kept, _ = kept_includes
    shared = write_yaml(tmp_path / "shared.yaml", "num_fewshot: 1\n")
    task = write_yaml(tmp_path / "task.yaml", "include: shared.yaml\n")
    before = os.stat(shared)
    assert kept.load_yaml(task, **INDEX_LOAD) == {"num_fewshot": 1}
    for _ in range(400):  # until a coarse clock's next tick (one is 1-10 ms)
        time.sleep(0.005)
        write_yaml(shared, "num_fewshot: 2\n")
        os.utime(shared, ns=(before.st_atime_ns, before.st_mtime_ns))
        if os.stat(shared).st_ctime_ns != before.st_ctime_ns:
            break
    assert os.stat(shared).st_mtime_ns == before.st_mtime_ns
    assert kept.load_yaml(task, **INDEX_LOAD) == {"num_fewshot": 2}


RANDOM_TREE_FILES = ["a.yaml", "b.yaml", "sub/c.yaml", "sub/d.yaml", "ü/e f.yaml"]


def random_yaml(rng: random.Random, folder: Path, padding: int) -> str:
    """A task YAML of random keys and includes (by name, absolute, through ``..``, a link
    to a file, a link to a folder, missing, a cycle), or one lm-eval refuses; ``padding``
    makes each version of a file a size of its own, so that no file clock can hide an
    edit (the hook leaves such racy files to lm-eval only after ``settled_s``)."""
    if rng.random() < 0.08:
        return rng.choice(["- not a dict\n", "key: [unclosed\n", ""]) + "#" * padding
    lines = [f"k{rng.randint(0, 3)}: {rng.choice(['1', 'x', '[1, 2]', '{n: 1}'])}"]
    if rng.random() < 0.3:
        lines.append("task_list: [t]")
    if rng.random() < 0.2:
        lines.append("fn: !function utils.f")
    if rng.random() < 0.75:
        names = [
            rng.choice([*RANDOM_TREE_FILES, "missing.yaml", "file_link.yaml", "folder_link/c.yaml"])
            for _ in range(rng.choice([1, 1, 2, 3]))
        ]
        names = [
            str(folder / name)
            if rng.random() < 0.2
            else f"sub/../{name}"
            if rng.random() < 0.1
            else name
            for name in names
        ]
        lines.append(f"include: {names[0]!r}" if len(names) == 1 else f"include: {names!r}")
    return "\n".join(lines) + "\n#" + "#" * padding


@pytest.mark.parametrize("seed", range(30))
def test_kept_includes_against_lm_eval_on_random_include_trees(seed, tmp_path):
    """Random trees of includes, edited, removed and relinked between loads: every load,
    as an include (with a ``_seen`` that may already hold files) or at the top, gives
    lm-eval's dict or error and leaves ``_seen`` as lm-eval does."""
    rng = random.Random(seed)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub2").mkdir()
    (tmp_path / "ü").mkdir()
    write_yaml(tmp_path / "sub2" / "c.yaml", "k9: 9\n")
    versions = itertools.count()

    def rewrite(name: str) -> None:
        write_yaml(tmp_path / name, random_yaml(rng, tmp_path, next(versions)))

    def relink(link: str, target: Path) -> None:
        (tmp_path / link).unlink(missing_ok=True)
        (tmp_path / link).symlink_to(target)

    for name in RANDOM_TREE_FILES:
        rewrite(name)
    relink("file_link.yaml", tmp_path / rng.choice(RANDOM_TREE_FILES))
    relink("folder_link", tmp_path / "sub")
    shipped = lm_eval_yaml_loader()
    kept, _ = loader_with_kept_includes(settled_s=0)
    for _ in range(80):
        action = rng.random()
        name = rng.choice(RANDOM_TREE_FILES)
        if action < 0.2:
            rewrite(name)
        elif action < 0.23:
            path = tmp_path / name
            path.unlink() if path.exists() else rewrite(name)
        elif action < 0.4:
            relink("file_link.yaml", tmp_path / name)
            relink("folder_link", tmp_path / rng.choice(["sub", "sub2"]))
        else:
            path = tmp_path / name if rng.random() < 0.5 else str(tmp_path / name)
            recursive = rng.random() < 0.9
            held = {(tmp_path / other).resolve() for other in rng.sample(RANDOM_TREE_FILES, 2)}
            held = held if rng.random() < 0.3 else set()
            loads = []
            for yaml_loader in (shipped, kept):
                seen = set(held)
                as_include = outcome(
                    yaml_loader, path, resolve_func=False, recursive=recursive, _seen=seen
                )
                at_top = outcome(yaml_loader, path, resolve_func=False, recursive=recursive)
                loads.append((as_include, seen, at_top))
            assert loads[1] == loads[0], (seed, name)


def test_kept_includes_only_for_the_index_s_loads(tmp_path, kept_includes):
    """A load that resolves ``!function`` imports modules, which lm-eval reloads when they
    change: its includes are lm-eval's every time."""
    kept, counted = kept_includes
    shared = write_yaml(tmp_path / "shared.yaml", "num_fewshot: 0\n")
    task = write_yaml(tmp_path / "task.yaml", "include: shared.yaml\ntask: t\n")
    for _ in range(2):
        kept.load_yaml(task)
        kept.load_yaml(task, resolve_func=True, recursive=True)
    assert counted.count(shared.resolve()) == 4
    for _ in range(2):
        kept.load_yaml(task, **INDEX_LOAD)
    assert counted.count(shared.resolve()) == 5
    # Not recursive (lm-eval takes any true value for recursive): the include is not read.
    unmerged = {"include": "shared.yaml", "task": "t"}
    assert kept.load_yaml(task, resolve_func=False, recursive=[], _seen=set()) == unmerged


def test_lm_eval_loads_through_the_three_wrappers():
    import lm_eval.tasks._index as index
    import lm_eval.tasks._yaml_loader as yaml_loader

    assert index.load_yaml is yaml_loader.load_yaml
    outer = yaml_loader.load_yaml
    assert outer.__qualname__.startswith(hook._record_pair_task_yamls.__name__)
    middle = wrapped_function(outer)
    assert middle.__qualname__.startswith(hook._resolve_template_includes.__name__)
    assert wrapped_function(middle).__qualname__.startswith(hook._memoize_includes.__name__)


def test_lm_eval_builds_task_configs_through_the_metadata_wrapper():
    """Each ``TaskConfig`` goes to the pair loaders' module (tests/test_tasks_loader.py
    checks what it does); an lm-eval whose module has no ``TaskConfig`` is left alone."""
    from lm_eval.config.task import TaskConfig

    assert TaskConfig.__post_init__.__qualname__.startswith(
        hook._keep_pair_options_out_of_metadata.__name__
    )
    elsewhere = ModuleType("lm_eval.config.task")
    hook._keep_pair_options_out_of_metadata(elsewhere)
    assert vars(elsewhere).keys() == vars(ModuleType("lm_eval.config.task")).keys()


def wrapped_function(wrapper):
    """The one function that a wrapper of the hook closes over."""
    (inner,) = (cell.cell_contents for cell in wrapper.__closure__ if callable(cell.cell_contents))
    return inner


def write_pair_task(folder: Path, data: str) -> Path:
    """A pair task that includes our template by name and reads ``p.csv`` beside it."""
    write_yaml(folder / "p.csv", data)
    return write_yaml(
        folder / "by_path.yaml",
        "task: by_path\ninclude: pll_harness:minimal_pair.yaml\n"
        "dataset_kwargs: {data_files: p.csv, good: g, bad: b}\n",
    )


@pytest.mark.parametrize("given", ["file", "folder"])
def test_a_pair_task_given_to_tasks_by_path_reads_the_files_beside_it(given, tmp_path, monkeypatch):
    """``--tasks path/to/task.yaml`` (or its folder) makes lm-eval load the YAML itself and
    hand the task over as an "inline" dict: its relative ``data_files`` are read beside the
    YAML, not from a file of that name in the cwd."""
    import functools

    import lm_eval.tasks
    from lm_eval.config.evaluate_config import EvaluatorConfig

    (tmp_path / "tasks").mkdir()
    (tmp_path / "cwd").mkdir()
    write_pair_task(tmp_path / "tasks", "g,b\nRight.,B.\n")
    write_yaml(tmp_path / "cwd" / "p.csv", "g,b\nWrong.,B.\n")
    monkeypatch.chdir(tmp_path / "cwd")
    # lm-eval's own tasks are not needed here, and indexing them takes seconds.
    no_defaults = functools.partial(lm_eval.tasks.TaskManager, include_defaults=False)
    monkeypatch.setattr(lm_eval.tasks, "TaskManager", no_defaults)
    config = EvaluatorConfig(tasks="../tasks/by_path.yaml" if given == "file" else "../tasks")
    task = config.process_tasks().load(config.tasks)["tasks"]["by_path"]
    assert [doc["sentence_good"] for doc in task.eval_docs] == ["Right."]


def test_only_a_pair_task_loaded_at_the_top_with_its_functions_is_recorded(tmp_path):
    """Includes, the index's loads (functions unresolved) and other tasks load as without
    the record (templates by name resolved in both)."""
    from pll_harness.tasks import minimal_pairs

    unrecorded = lm_eval_yaml_loader()
    hook._resolve_template_includes(unrecorded)
    wrapped = lm_eval_yaml_loader()
    hook._wrap_yaml_loader(wrapped)
    pair_task = write_pair_task(tmp_path, "g,b\nA.,B.\n")
    other = write_yaml(tmp_path / "other.yaml", "task: other\nmetadata: {version: 2}\n")
    loaded = wrapped.load_yaml(pair_task, resolve_func=True)
    assert loaded["metadata"] == {
        "version": 1.0,
        minimal_pairs.TASK_YAML_KEY: str(pair_task.resolve()),
    }
    for path, kwargs in [
        (pair_task, {"resolve_func": True, "_seen": set()}),
        (pair_task, INDEX_LOAD),
        (other, {}),
        (other, INDEX_LOAD),
    ]:
        expected = outcome(unrecorded, path, **copy.deepcopy(kwargs))
        assert outcome(wrapped, path, **kwargs) == expected, kwargs


def test_hook_module_is_what_the_package_installs():
    """The tests import the installed copy; it must be the repository's current hook."""
    source = Path(__file__).resolve().parents[1] / "hook" / "_pll_harness_hook.py"
    if not source.is_file():
        pytest.skip("not run from a checkout")
    assert Path(hook.__file__).read_text() == source.read_text(), (
        "reinstall the package (pip install .) after editing hook/"
    )
