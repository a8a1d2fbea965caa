"""The packages of steplint import in one direction: no module reaches, directly or through others, a
module that imports it back (the project layer builds on the model, never the reverse). Imports are
read with `ast`, those inside functions included; those under `if TYPE_CHECKING:` never run and are
left out."""

import ast
from pathlib import Path

import steplint

ROOT = Path(steplint.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def run_time_nodes(node: ast.AST):
    """The nodes under `node`, without the bodies of `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            child = ast.Module(body=child.orelse, type_ignores=[])
        yield child
        yield from run_time_nodes(child)


def imported(tree: ast.AST, name: str, is_package: bool, known: set) -> set:
    found = set()
    for node in run_time_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known)
    return {f for f in found if f in known and f != name}


def import_graph() -> dict:
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    known = set(paths)
    return {name: imported(ast.parse(path.read_text()), name, path.name == "__init__.py", known) for name, path in paths.items()}


def cycle_through(graph: dict, start: str):
    """A path start -> ... -> start, or None."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph[node]:
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_no_module_imports_itself_back():
    graph = import_graph()
    cycles = [" -> ".join(c) for c in (cycle_through(graph, name) for name in sorted(graph)) if c]
    assert cycles == []


def test_the_model_does_not_import_the_project_layer():
    graph = import_graph()
    upward = sorted(f"{name} -> {target}" for name, targets in graph.items() if name.startswith("steplint.model") for target in targets if target.startswith("steplint.project"))
    assert upward == []


def test_the_reader_sees_a_cycle_it_is_shown():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycle_through(graph, "a") == ["a", "b", "c", "a"]
    assert cycle_through(graph, "d") is None
