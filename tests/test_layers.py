"""Layers point down, and this test says so (docs/decisions.md, "Layers point down")."""

import ast

from _support import ROOT

OURS = {"agents", "blackboard", "evaluator", "knowledge", "kernel_scientist"}
ALLOWED = {
    "blackboard": set(),
    "evaluator": {"blackboard"},
    "knowledge": {"blackboard"},
    "agents": {"blackboard", "evaluator", "knowledge"},
    "kernel_scientist": {"agents", "blackboard", "evaluator", "knowledge"},
}
AGENT_MODULES = {"archivist", "theorist", "engineer", "critic", "evaluator_agent"}


def _layer(name: str) -> str:
    """The layer an absolute import names: ``kernel_scientist.agents.brain`` is in agents (the
    folders are installed as subpackages of kernel_scientist, docs/decisions.md)."""
    parts = name.split(".")
    if parts[0] == "kernel_scientist" and len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    return parts[0]


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, 0
        elif isinstance(node, ast.ImportFrom) and node.module == "kernel_scientist" and not node.level:
            for alias in node.names:  # from kernel_scientist import knowledge: the layer, by name
                yield f"kernel_scientist.{alias.name}", 0
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level


def test_packages_import_only_lower_layers():
    for package, allowed in ALLOWED.items():
        for path in (ROOT / package).rglob("*.py"):
            if "tasks" in path.parts:  # problem folders are data, run inside the sandbox
                continue
            for name, level in _imports(path):
                top = _layer(name)
                if level == 0 and top in OURS and top != package:
                    assert top in allowed, f"{path.relative_to(ROOT)} imports {name}"


def test_no_agent_imports_another():
    for module in AGENT_MODULES:
        path = ROOT / "agents" / f"{module}.py"
        for name, level in _imports(path):
            last = name.split(".")[-1]
            assert not (level and last in AGENT_MODULES - {module}), f"{module} imports {name}"


def _module_name(path) -> str:
    """``evaluator/sandbox/_child.py`` -> ``kernel_scientist.evaluator.sandbox._child`` (the installed name)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts if parts[0] == "kernel_scientist" else ["kernel_scientist", *parts])


def _graph() -> dict[str, set[str]]:
    """Every module of ours and the modules of ours it imports, at its top or inside a function."""
    paths = [p for package in OURS for p in (ROOT / package).rglob("*.py") if "tasks" not in p.parts]
    names = {_module_name(p): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges = set()
        for target, level in _imports(path):
            if level:
                base = package.split(".")[: len(package.split(".")) - (level - 1)]
                target = ".".join(base + ([target] if target else []))
            while target and target not in names:  # `from pkg import module` names pkg.module's parent
                target = target.rsplit(".", 1)[0] if "." in target else ""
            if target and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


def test_no_module_of_ours_imports_itself_back_through_others():
    """No import cycle, however deep (a package's ``__init__`` importing its own modules is not one:
    only edges from a module to a module that is not its own package count)."""
    graph = {
        name: {t for t in edges if not name.startswith(t + ".")}  # a module importing its package's face
        for name, edges in _graph().items()
    }
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt) :] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_the_evaluators_roles_point_down():
    """Inside the evaluator: the timing model imports neither the sandbox nor the backends, and the
    sandbox does not import the backends (the backends use both, through their faces)."""
    below = {"model": {"sandbox", "backends"}, "sandbox": {"backends"}}
    for name, edges in _graph().items():
        parts = name.split(".")
        if len(parts) > 2 and parts[1] == "evaluator" and parts[2] in below:
            for target in edges:
                t = target.split(".")
                assert not (len(t) > 2 and t[1] == "evaluator" and t[2] in below[parts[2]]), f"{name} imports {target}"
