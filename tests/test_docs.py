"""The README is a short guide and its deeper pages exist; the scenario reference matches the code."""

import pathlib
import re

from _support import ROOT
from kernel_scientist.blackboard import Scenario
from kernel_scientist.blackboard._keys import reference

ROW = re.compile(r"^\| `(?P<key>[\w.]+)` \| (?P<default>[^|]*) \| (?P<accepts>[^|]*) \|")


def test_the_scenario_reference_lists_every_key_with_its_default_and_range():
    page = (ROOT / "docs" / "scenarios.md").read_text()
    rows = [(m["key"], m["default"].strip(), m["accepts"].strip()) for m in map(ROW.match, page.splitlines()) if m]
    expected = reference(Scenario)
    missing = [r for r in expected if r not in rows]
    stale = [r for r in rows if r not in expected]
    assert not missing and not stale, (
        "docs/scenarios.md differs from blackboard/config.py; rows the code has that the page lacks "
        f"(key, default, accepts): {missing}; rows the page has that the code does not: {stale}"
    )
    assert [r[0] for r in rows] == [r[0] for r in expected]  # in the Structs' order


def _links(path):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
        if not re.match(r"[a-z]+://", target):
            yield target


def test_the_readme_is_a_short_guide_and_every_page_it_links_exists():
    readme = ROOT / "README.md"
    text = readme.read_text()
    assert len(text.splitlines()) < 150
    for page in [readme, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in _links(page):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"
    linked = set(_links(readme))
    for page in (
        "docs/scenarios.md",
        "docs/problem-folders.md",
        "docs/real-gpus.md",
        "docs/llm-brains.md",
        "docs/techniques.md",
        "docs/ray.md",
        "docs/evaluator.md",
        "docs/h200.md",
        "docs/decisions.md",
        "docs/stack-pitfalls.md",
        "docs/evaluator-attacks.md",
        "docs/task-facts.md",
        "docs/model.md",
    ):
        assert page in linked, f"README does not link {page}"
    assert "pip install -c constraints.txt -e '.[test]'" in text
    assert "kernel-scientist run scenarios/amd_fp8_mm_mi300x.toml" in text
    assert "https://download.pytorch.org/whl/cpu" in text
    assert "stderr" in text and "stdout" in text


# Notes that once pointed outside the repository (the project's design brief, its style guide, a
# folder of measured facts): a reader of the code cannot open them, so they must not be cited.
OUTSIDE = re.compile(r"facts/|STYLE\.md|DESIGN\.md|design card")


def test_no_comment_or_page_points_to_a_file_outside_the_repository():
    import subprocess

    tracked = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.py", "*.md", "*.toml", "*.sh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    here = pathlib.Path(__file__).resolve()
    hits = [
        f"{name}:{i}: {line.strip()}"
        for name in tracked
        if (ROOT / name).resolve() != here and (ROOT / name).exists()
        for i, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, "move the note into docs/ or inline it:\n" + "\n".join(hits)
