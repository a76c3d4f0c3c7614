"""Imports point one way: ``model.py`` (label-studio-ml) -> ``backend`` -> ``subregweigh``.

The engine knows nothing of Label Studio's packages (it reads export JSON by hand), nor of the
backend; the backend knows nothing of ``model.py``, so an installed ``backend`` works anywhere.
Read from the source with ``ast``: every import, at module level or inside a function.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.paths import REPO

# package -> top-level modules it must not import
FORBIDDEN = {
    "subregweigh": {"backend", "model", "_wsgi", "flask", "werkzeug", "rq", "redis"},
    "backend": {"model", "_wsgi"},
}
LABEL_STUDIO = "label_studio"  # label_studio_sdk, label_studio_ml, label_studio_tools, ...


def imported_modules(path: Path, package: str) -> set[str]:
    """Every module ``path`` imports (relative imports resolved against ``package``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # from . import x / from .x import y: inside the package
                out.add(package)
            else:
                out.add(node.module or "")
        elif (
            isinstance(node, ast.Call)  # importlib.import_module("model"), __import__("model")
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            out.add(str(node.args[0].value))
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_from_a_layer_above(package):
    files = sorted((REPO / package).rglob("*.py"))
    assert len(files) >= 8
    wrong = []
    for path in files:
        for module in imported_modules(path, package):
            top = module.split(".")[0]
            if top in FORBIDDEN[package] or (
                package == "subregweigh" and top.startswith(LABEL_STUDIO)
            ):
                wrong.append(f"{path.relative_to(REPO)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_imports():
    """The parser finds what it must (a check that finds nothing proves nothing)."""
    found = imported_modules(REPO / "model.py", "")
    assert {"backend.jobs", "label_studio_ml.model", "backend.config.settings"} <= found
    assert "label_studio_sdk.label_interface" in imported_modules(
        REPO / "backend" / "labelstudio" / "tasks.py", "backend.labelstudio"
    )


def test_rq_jobs_are_functions_not_paths_into_model():
    """The job the server queues is a function of ``backend`` (pickled by reference), not a
    ``"module:function"`` string that a worker resolves, once ``"model:train_project"``."""
    for path in sorted((REPO / "backend").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not node.value.startswith("model:"), f"{path.name}: {node.value!r}"


# Run from the repository root as modules (python -m benchmarks.NAME, python -m scripts.NAME):
# what they share with the tests is testbed/, never the test suite itself.
RUN_AS_MODULES = ("benchmarks", "scripts", "testbed")
OLD_INVOCATION = re.compile(r"\bpython3? +(?:benchmarks|scripts)/\w+\.py\b")


def path_edits(source: str) -> list[int]:
    """Lines of ``source`` that touch ``sys.path`` (or ``site.addsitedir``, ``PYTHONPATH``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in {("sys", "path"), ("site", "addsitedir")}:
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module in {"sys", "site"}:
            if {alias.name for alias in node.names} & {"path", "addsitedir"}:
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and node.value == "PYTHONPATH":
            lines.append(node.lineno)
    return sorted(lines)


def test_benchmarks_and_scripts_leave_sys_path_and_the_tests_alone():
    files = sorted(path for top in RUN_AS_MODULES for path in (REPO / top).rglob("*.py"))
    assert len(files) >= 20
    wrong = []
    for path in files:
        name = path.relative_to(REPO)
        for line in path_edits(path.read_text()):
            wrong.append(f"{name}:{line} touches sys.path")
        for module in imported_modules(path, path.parent.name):
            if module.split(".")[0] == "tests":
                wrong.append(f"{name} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_sys_path_check_sees_edits():
    source = "import sys\nsys.path.insert(0, 'x')\nfrom sys import path\nimport os\n"
    source += "os.environ['PYTHONPATH'] = 'x'\n"
    assert path_edits(source) == [2, 3, 5]
    assert path_edits("import sys\nprint(sys.argv)\n") == []


def test_docs_run_benchmarks_and_scripts_as_modules():
    """``python benchmarks/NAME.py`` no longer runs (benchmarks/ is a package): the README, the
    docs and the modules' docstrings say ``python -m benchmarks.NAME`` (the results in
    benchmarks/results keep the commands that made them)."""
    texts = {path: path.read_text() for path in [REPO / "README.md", *(REPO / "docs").glob("*.md")]}
    for top in RUN_AS_MODULES:
        for path in (REPO / top).rglob("*.py"):
            texts[path] = ast.get_docstring(ast.parse(path.read_text())) or ""
    wrong = [
        f"{path.relative_to(REPO)}: {found}"
        for path, text in sorted(texts.items())
        for found in OLD_INVOCATION.findall(text)
    ]
    assert len(texts) >= 20 and not wrong, "\n".join(wrong)
