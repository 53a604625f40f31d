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
