"""The plugin entry points and the start-up hook that stands in for them where lm-eval does
not read them (hook/_pll_harness_hook.py, as installed).

The installed lm-eval takes one of two paths, checked for real in a fresh interpreter; the
other path's logic is checked here on stand-in modules: the hook stays out of the way of an
lm-eval that reads entry points itself, and our entry points resolve the way such an lm-eval
resolves them (EleutherAI/lm-evaluation-harness#4013 for models, #4015 for tasks).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

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


def test_hook_module_is_what_the_package_installs():
    """The tests import the installed copy; it must be the repository's current hook."""
    source = Path(__file__).resolve().parents[1] / "hook" / "_pll_harness_hook.py"
    if not source.is_file():
        pytest.skip("not run from a checkout")
    assert Path(hook.__file__).read_text() == source.read_text(), (
        "reinstall the package (pip install .) after editing hook/"
    )
