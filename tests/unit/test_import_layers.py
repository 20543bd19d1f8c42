"""The provider's parts import one another in one direction only.

Sensors and operators defer on triggers, so triggers (and the plugin, which only reads) must not
import from sensors or operators: a trigger that reached into a sensor's module for the code both
use made an import circle. Read from the source with ``ast``, every import counted, also the lazy
ones inside functions and those under ``TYPE_CHECKING``; nothing is imported.

The graph's nodes are the package's top-level parts (``core``, ``sensors``, ``settings``, ...); the
package's own ``__init__`` is left out: it names the public classes for lazy import, above all.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "airflow_provider_zeta"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / PACKAGE
MODULES = {
    ".".join(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts).removesuffix(".__init__"): path
    for path in PACKAGE_DIR.rglob("*.py")
}


def imported_modules(module: str) -> set[str]:
    """The package's modules ``module`` imports, anywhere in its body (relative imports resolved)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # ``from pkg import submodule`` imports the submodule; ``from module import name`` does not.
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return {name for name in found if name == PACKAGE or name.startswith(PACKAGE + ".")}


def part_of(module: str) -> str | None:
    """The top-level part (subpackage or module) ``module`` belongs to; None for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def part_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        source = part_of(module)
        if source is None:
            continue
        graph.setdefault(source, set())
        for target in map(part_of, imported_modules(module)):
            if target is not None and target != source:
                graph[source].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that returns to its start, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        for target in sorted(graph.get(node, ())):
            cycle = visit(target, [*path, node])
            if cycle:
                return cycle
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start, [])
        if cycle:
            return cycle
    return None


def test_the_reader_sees_every_kind_of_import():
    """Guards the tests below against passing because the reader misses imports."""
    sensor = imported_modules(f"{PACKAGE}.sensors.ready_to_close")
    assert f"{PACKAGE}.core.ready" in sensor  # module level
    assert f"{PACKAGE}.triggers.ready_to_close" in sensor  # inside a method
    assert f"{PACKAGE}.triggers" in sensor  # ``from airflow_provider_zeta.triggers import not_before``
    assert f"{PACKAGE}.plugins.page" in imported_modules(f"{PACKAGE}.plugins.api")  # ``from ..plugins import page``
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_triggers_and_the_plugin_import_nothing_from_sensors_or_operators():
    forbidden = (f"{PACKAGE}.sensors", f"{PACKAGE}.operators")
    offending = sorted(
        f"{module} imports {target}"
        for module in MODULES
        if part_of(module) in ("triggers", "plugins")
        for target in imported_modules(module)
        if target in forbidden or target.startswith(tuple(f"{name}." for name in forbidden))
    )
    assert offending == []


def test_no_import_cycle_between_the_parts_of_the_package():
    graph = part_graph()
    assert {"triggers", "sensors", "operators", "plugins", "core"} <= set(graph)
    assert find_cycle(graph) is None
