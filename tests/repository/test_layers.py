"""Imports point one way: ``model.py`` (label-studio-ml) -> ``backend`` -> ``subregweigh``.

The engine knows nothing of Label Studio's packages (it reads export JSON by hand), nor of the
backend; the backend knows nothing of ``model.py``, so an installed ``backend`` works anywhere.
Inside the backend, every module lives in a role package (:data:`ALLOWED`: what each may
import), no import circle exists, and the jobs stand side by side (:data:`JOBS`).
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


def imported_modules(path: Path, package: str, submodules: bool = False) -> set[str]:
    """Every module ``path`` imports (relative imports resolved against ``package``). With
    ``submodules``, ``from a.b import c`` names ``a.b.c`` too (a module where ``c`` is one:
    :func:`module_graph` keeps those that are), and a relative import is resolved in full."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level and not submodules:  # from . import x / from .x import y: inside
                out.add(package)
                continue
            module = node.module or ""
            if node.level:  # from ..x import y, against package
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([module] if module else [])])
            out.add(module)
            if submodules:
                out.update(f"{module}.{alias.name}" for alias in node.names)
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
    for path in sorted((REPO / "backend").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not node.value.startswith("model:"), f"{path}: {node.value!r}"


# The backend's role packages -> the other backend packages each may import. From the bottom:
# the project store imports none; the settings read a project's from it; Label Studio's client
# and tasks; the reviewers' decisions (over the tasks' parser); what is served; the queue, which
# runs whatever the web layer binds to it; the jobs, over all of these but the web layer; and
# the web layer, which wires the jobs to the queue.
ALLOWED = {
    "store": set(),
    "config": {"store"},
    "labelstudio": {"config", "store"},
    "review": {"labelstudio", "config", "store"},
    "serving": {"review", "labelstudio", "config", "store"},
    "queue": {"config", "store"},
    "jobs": {"queue", "serving", "review", "labelstudio", "config", "store"},
    "web": {"jobs", "queue", "serving", "review", "labelstudio", "config", "store"},
}
# The jobs, side by side in backend/jobs/: none imports another; a job that triggers another is
# given it (the rescore's refresh, bound by backend.web.server). What they share lives beside
# them (backend/jobs/phases.py, annotations.py) and imports no job.
JOBS = {"training", "rescore", "refresh", "selftest"}
# (job, job it imports) pairs still to be removed; empty: no job imports another.
JOB_IMPORTS_TO_REMOVE: set[tuple[str, str]] = set()


def module_name(path: Path, root: Path) -> str:
    """``root/a/b.py`` -> ``a.b``; a package's ``__init__.py`` -> the package."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(root: Path, top: str) -> dict[str, set[str]]:
    """Each module of the package ``root/top`` -> the modules of it that it imports, at module
    level or inside a function (``from top.x import y`` is an import of ``top.x.y`` where that
    is a module, else of ``top.x``)."""
    paths = {module_name(p, root): p for p in sorted((root / top).rglob("*.py"))}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = imported_modules(path, package, submodules=True)
        graph[name] = {module for module in found if module in paths and module != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """An import circle of ``graph`` (``[a, b, ..., a]``), or None: a depth-first search that
    meets a module still on its path."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                done.add(path.pop())
                stack.pop()
            elif nxt in path:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in done:
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def role(module: str) -> str:
    """The role package of a backend module (``backend.web.routes`` -> ``web``); "" for the
    backend's own ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


BACKEND_GRAPH = module_graph(REPO, "backend")


def test_every_backend_module_is_in_a_role_package():
    loose = [p.name for p in (REPO / "backend").glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"put these in a role package of backend/ ({', '.join(ALLOWED)}): {loose}"
    packages = {p.parent for p in (REPO / "backend").rglob("*.py")} - {REPO / "backend"}
    assert {p.name for p in packages} == set(ALLOWED), "a package of backend/ not in ALLOWED"
    for package in packages:  # each says what it owns and what it may import
        init = package / "__init__.py"
        assert init.is_file(), f"{package} has no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc, f"{init}: say what the package owns and what it may import"
    assert len(BACKEND_GRAPH) >= 40


def test_no_import_circle_in_the_backend():
    cycle = find_cycle(BACKEND_GRAPH)
    assert cycle is None, "an import circle: " + " -> ".join(cycle or ())


def test_the_cycle_finder_finds_a_planted_circle(tmp_path):
    """Through a lazy import and a ``from package import module``, as the backend's circles
    went (a check that finds nothing proves nothing)."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("from pkg import c\n")
    (tmp_path / "pkg" / "c.py").write_text("import pkg.a\nfrom pkg.sub.b import NAME\n")
    graph = module_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"}  # the lazy import, to the module
    assert graph["pkg.sub.b"] == {"pkg", "pkg.c"} and graph["pkg.c"] == {"pkg.a", "pkg.sub.b"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (tmp_path / "pkg" / "c.py").write_text("from pkg.sub.b import NAME\n")  # two, by a name
    assert find_cycle(module_graph(tmp_path, "pkg")) == ["pkg.sub.b", "pkg.c", "pkg.sub.b"]
    (tmp_path / "pkg" / "c.py").write_text("X = 1\n")
    assert find_cycle(module_graph(tmp_path, "pkg")) is None


def test_the_role_packages_import_only_what_the_map_allows():
    assert find_cycle({name: set(below) for name, below in ALLOWED.items()}) is None
    wrong = [
        f"{module} imports {target} ({role(module)} may import {sorted(ALLOWED[role(module)])})"
        for module, targets in sorted(BACKEND_GRAPH.items())
        for target in sorted(targets)
        if role(module) and role(target) and role(target) != role(module)
        if role(target) not in ALLOWED[role(module)]
    ]
    assert not wrong, "\n".join(wrong)


def test_no_job_imports_another():
    jobs = {f"backend.jobs.{job}" for job in JOBS}
    assert jobs <= set(BACKEND_GRAPH), "a job of JOBS is not in backend/jobs/"
    found = {
        (module.rpartition(".")[2], target.rpartition(".")[2])
        for module, targets in BACKEND_GRAPH.items()
        if module.startswith("backend.jobs.")
        for target in targets & jobs
    }
    assert found <= JOB_IMPORTS_TO_REMOVE, f"jobs importing jobs: {sorted(found)}"
    assert JOB_IMPORTS_TO_REMOVE <= found, "remove the pairs no job imports any more"


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
