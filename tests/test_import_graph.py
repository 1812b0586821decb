"""The harness's modules import each other without cycles, and each stays small.

The import graph is read with `ast` from harness/**/*.py, counting imports inside functions
too: a lazy import that breaks a cycle at import time still ties the modules together.
A package counts as imported only when it is named itself (`from harness import checkers`),
not for each of its submodules, whose import only runs its (short) __init__.
"""

from __future__ import annotations

import ast
import pathlib

import harness

ROOT = pathlib.Path(harness.__file__).parent
MAX_LINES = 600


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = ["harness", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(module: str, path: pathlib.Path, known: dict[str, pathlib.Path]) -> set[str]:
    """The harness modules `module` imports, anywhere in its body."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def nearest(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    names: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(nearest(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                names.add(full if full in known else nearest(base))
    return {name for name in names if name is not None and name != module}


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    return {module: _imported(module, path, known) for module, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_imports_inside_functions(tmp_path: pathlib.Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from harness.faults import spec\n    return spec\n")
    known = {"harness.lazy": module, "harness.faults.spec": module}
    assert _imported("harness.lazy", module, known) == {"harness.faults.spec"}


def test_the_graph_knows_the_modules_that_tie_scenarios_faults_and_histories() -> None:
    graph = import_graph()
    assert "harness.faults.spec" in graph["harness.scenario.schema"]
    assert "harness.faults.spec" in graph["harness.record.history"]
    assert "harness.contract.run_report" in graph["harness.record.history"]


def test_no_import_cycle_among_harness_modules() -> None:
    assert cycles(import_graph()) == []


def test_no_harness_module_is_over_600_lines() -> None:
    sizes = {module: len(path.read_text().splitlines()) for module, path in _modules().items()}
    assert {module: lines for module, lines in sizes.items() if lines > MAX_LINES} == {}


# The floors of harness/, lowest first: a folder may import only folders on a lower floor
# (or its own). Top-level modules are floors of their own; `harness.checkers` (the package,
# whose __init__ is the registry) counts as the checkers folder.
FLOORS: list[set[str]] = [
    {"errors", "provenance"},
    {"inputs"},
    {"contract"},
    {"faults"},
    {"scenario"},
    {"world"},
    {"record"},
    {"checkers", "engines"},
    {"lab"},
    {"planning"},
    {"nemesis"},
    {"trial"},
    {"report", "pool"},
    {"campaigns", "incident"},
    {"shards"},
    {"cli", "pytest_plugin"},
    {"__main__"},
]


def folder_of(module: str) -> str:
    """harness.trial.runner -> trial; harness.errors -> errors; harness -> harness."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for module, imported in graph.items():
        own = folder_of(module)
        folders.setdefault(own, set()).update(
            folder_of(other) for other in imported if folder_of(other) != own
        )
    return folders


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    floor = {folder: level for level, folders in enumerate(FLOORS) for folder in folders}
    return sorted(
        f"{module} -> {other}"
        for module, imported in graph.items()
        for other in imported
        if folder_of(module) in floor
        and folder_of(other) in floor
        and floor[folder_of(other)] > floor[folder_of(module)]
    )


def test_the_folder_view_sees_an_upward_import() -> None:
    graph = {"harness.record.history": {"harness.trial.runner"}, "harness.trial.runner": set()}
    assert upward_imports(graph) == ["harness.record.history -> harness.trial.runner"]
    assert cycles(folder_graph({**graph, "harness.trial.runner": {"harness.record.x"}})) == [
        ["record", "trial"]
    ]


def test_every_folder_of_harness_is_on_a_floor() -> None:
    placed = set().union(*FLOORS)
    folders = {folder_of(module) for module in import_graph()} - {"harness"}
    assert folders - placed == set()


def test_folders_import_one_way() -> None:
    graph = import_graph()
    assert cycles(folder_graph(graph)) == []
    assert upward_imports(graph) == []


def test_reference_engine_never_imports_harness() -> None:
    engine = ROOT.parent / "reference_engine"
    found = []
    for path in engine.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [f"{path.name}: {name}" for name in names if name.split(".")[0] == "harness"]
    assert found == []
