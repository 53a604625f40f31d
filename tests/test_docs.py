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


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and underscores dropped."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page):
    return {_anchor(m) for m in re.findall(r"^#{1,6} (.+)$", page.read_text(), re.M)}


def test_the_readme_is_a_short_guide_and_every_page_it_links_exists():
    readme = ROOT / "README.md"
    text = readme.read_text()
    assert len(text.splitlines()) < 150
    for page in PAGES:
        for target in _links(page):  # pages, data files, folders: every relative link
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
        "docs/results.md",
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


def test_every_section_a_page_links_to_exists():
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            linked = (page.parent / target) if target else page
            if linked.suffix == ".md":
                assert anchor in _anchors(linked), (
                    f"{page.relative_to(ROOT)} links to a missing section {target}#{anchor}"
                )


# A path to a data file written in a page's text (not only as a link): `docs/results/x.json.gz`,
# `results/x.log.gz`, `scripts/calibration/calib-sweep.json.gz`. Paths a user creates (runs/, OUT/,
# DIR/, /tmp) and ones read from git history (`git show REV:PATH`) are not files of the checkout.
DATA_PATH = re.compile(r"(?<![\w:/.-])((?:[\w.-]+/)+[\w.-]+\.(?:gz|json|jsonl|log|txt|csv|sqlite|png|svg))(?![\w/-])")
MADE_BY_THE_USER = ("runs/", "OUT/", "DIR/", "out/", "tmp/", "sweep/")  # sweep/: the sweep example's --out


def test_every_data_file_a_page_names_exists():
    for page in PAGES:
        for path in DATA_PATH.findall(page.read_text()):
            if path.startswith(MADE_BY_THE_USER) or "*" in path or re.search(r"\b[A-Z]{2,}\b", path):
                continue  # made by the user, a pattern, or a placeholder (FILE, NAME)
            assert (page.parent / path).exists() or (ROOT / path).exists(), (
                f"{page.relative_to(ROOT)} names {path}, which does not exist"
            )
    for page in PAGES:  # the lab notebook left for git history: nothing may link it
        assert not [t for t in _links(page) if re.search(r"(^|/)h200(\.md|/)", t)], page


def test_the_logs_the_results_page_names_are_in_its_archive():
    import fnmatch
    import tarfile

    page = (ROOT / "docs" / "results.md").read_text()
    body = page.split("## The data files")[0]  # that table names files by their old names too
    with tarfile.open(ROOT / "docs" / "results" / "explorations.tar.gz") as archive:
        members = archive.getnames()
    kept = {f.name.removesuffix(".gz") for f in (ROOT / "docs" / "results").iterdir()}
    for name in set(re.findall(r"`([\w*.-]+\.(?:log|txt|json))`", body)):
        assert fnmatch.filter(members, name) or name in kept, f"docs/results.md names {name}, in no data file"


def test_docs_stay_small():
    """docs/ is a guide with the few data files its claims rest on; earlier runs live in git history."""
    files = [f for f in (ROOT / "docs").rglob("*") if f.is_file()]
    assert sum(f.stat().st_size for f in files) < 2 * 1024 * 1024
    assert len(list((ROOT / "docs" / "results").iterdir())) <= 25


# Notes that once pointed outside the repository (the project's design brief, its style guide, a
# folder of measured facts): a reader of the code cannot open them, so they must not be cited.
OUTSIDE = re.compile(r"facts/|STYLE\.md|DESIGN\.md|design card")


def _text_lines():
    """(file name, line number, line) of every tracked or new source and page file."""
    import subprocess

    tracked = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.py", "*.md", "*.toml", "*.sh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in tracked:
        if (ROOT / name).exists():
            for i, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1):
                yield name, i, line


def test_no_comment_or_page_points_to_a_file_outside_the_repository():
    here = pathlib.Path(__file__).resolve()
    hits = [
        f"{name}:{i}: {line.strip()}"
        for name, i, line in _text_lines()
        if (ROOT / name).resolve() != here and OUTSIDE.search(line)
    ]
    assert not hits, "move the note into docs/ or inline it:\n" + "\n".join(hits)


# History belongs to git, not to the product: a comment or page states a conclusion and, where a
# measured number is the reason, the data file; never the session or the campaign that produced it.
DIARY = re.compile(
    r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|"
    r"fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|twenty-\w+)"
    r"( and \w+)? sessions?\b|\bsession \d+\b|\bcampaigns? [A-Z]{1,2}\d?\b(?![-\w])",
)
GONE = re.compile(r"docs/h200\b")  # the lab notebook the results page replaced (a page may cite it in git history)


def test_no_product_comment_or_page_names_a_session_or_a_campaign_letter():
    hits = [
        f"{name}:{i}: {line.strip()}"
        for name, i, line in _text_lines()
        if not name.startswith("tests/") and (DIARY.search(line) or (not name.endswith(".md") and GONE.search(line)))
    ]
    assert not hits, "say what and why, with the data file; history stays in git:\n" + "\n".join(hits)


def test_the_diary_pattern_catches_what_it_is_for():
    for said in ("the sixth session", "in the twenty-eighth session", "campaign O's kernel", "campaigns Q and R"):
        assert DIARY.search(said), said
    for fine in ("a new session whose process group", "the campaign's best", "a campaign-h200.sqlite.gz"):
        assert not DIARY.search(fine), fine


def test_the_readmes_layout_names_every_folder_and_only_what_exists():
    import subprocess

    text = (ROOT / "README.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    tops = {name.split("/")[0] for name in tracked if "/" in name and not name.startswith(".")}
    missing = [top for top in sorted(tops) if f"{top}/" not in block]
    assert not missing, f"README's layout does not name {missing}"
    folder = None
    for part in (p for line in block.splitlines() for p in line.split(";")):  # "a/ ...; b/ ..." names two
        lead = re.match(r"\s?(\w+)/", part)
        folder = ROOT / lead[1] if lead else folder
        for name in re.findall(r"(?<![\w/.])(\w+/|\w+\.py)", part):
            name = name.rstrip("/")
            found = (ROOT / name).exists() or (folder is not None and any(folder.rglob(name)))
            assert found, f"README's layout names {name}, which {folder} does not hold"
