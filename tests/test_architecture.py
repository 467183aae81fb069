"""The house rules of the tree: no import cycles (not even through imports inside functions),
physics modules of readable size, every module saying its job. The layer contracts themselves
are checked by ``lint-imports`` (pyproject.toml ``[tool.importlinter]``) in ``.ci/run``."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

grimp = pytest.importorskip("grimp")

PACKAGE = ROOT / "simsplit"
PHYSICS = ("fluid", "md")
MAX_PHYSICS_LINES = 500


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("simsplit", include_external_packages=False)
    cycles = sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if graph.chain_exists(importer=imported, imported=importer))
    assert not cycles, f"imports that close a cycle: {cycles}"


@pytest.mark.parametrize("package", PHYSICS)
def test_physics_modules_stay_small(package: str) -> None:
    sizes = {p.name: len(p.read_text().splitlines())
             for p in (PACKAGE / package).glob("*.py")}
    assert max(sizes.values()) <= MAX_PHYSICS_LINES, sizes


def test_every_module_has_a_docstring() -> None:
    missing = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
               if p.name != "__main__.py" and p.stat().st_size
               and ast.get_docstring(ast.parse(p.read_text())) is None]
    assert not missing, missing


def test_no_module_left_loose_at_the_top() -> None:
    """Only the front door, the entry point and the two leaves live at the top of the package."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py", "version.py"], loose
