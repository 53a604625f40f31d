"""Problem folders in GPU MODE's reference-kernels format, read into a ``Task``.

A folder holds ``task.yml`` (files to assemble, tests, benchmarks, ranking), ``reference.py``
(``generate_input``, ``ref_kernel``, ``check_implementation``), ``task.py`` (type aliases) and
usually a shared ``../utils.py``. We read the yml into Structs (decoding is validation) but do not
forbid unknown fields: the format belongs to someone else and grows keys we do not use.

``check_shapes`` are scaled-down stand-ins for the tests that the Triton CPU interpreter can run in
a fraction of a second. They keep the tests' edge cases (n % 128 == 64, m not a multiple of 64,
a single K block, several K blocks) and drop the sizes; the CPU verdict is a pre-screen, a real
GPU's verdict is the one that counts (facts/stack-notes.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import shutil
import sys
import types
from pathlib import Path

import msgspec

from blackboard.records import Shape


class TaskError(Exception):
    """A task folder that cannot be used; the message names the file and the problem."""


class _FileEntry(msgspec.Struct, frozen=True):
    name: str
    source: str


class _TaskYml(msgspec.Struct, frozen=True):
    files: list[_FileEntry] = []
    lang: str = "py"
    description: str = ""
    tests: list[dict[str, int]] = []
    benchmarks: list[dict[str, int]] = []
    ranking_by: str = "geom"


class Task(msgspec.Struct, frozen=True):
    name: str
    path: str
    description: str
    tests: list[Shape]
    benchmarks: list[Shape]
    ranking_by: str
    check_shapes: list[Shape]
    seed_source: str | None = None
    modules: dict[str, str] = {}  # import name -> file, for reference.py's own imports (task, utils)


def _shape(entry: dict[str, int], where: str) -> Shape:
    try:
        return Shape(m=entry["m"], n=entry["n"], k=entry["k"], seed=entry.get("seed", 0))
    except KeyError as exc:
        raise TaskError(f"{where}: entry {entry} lacks key {exc}; each needs m, n, k (and seed)") from None


def load_task(path: str | Path) -> Task:
    """Read a problem folder. Raises TaskError naming the file and the problem."""
    folder = Path(path).resolve()
    yml = folder / "task.yml"
    try:
        raw = yml.read_bytes()
    except OSError as exc:
        raise TaskError(f"{yml}: cannot read ({exc.strerror}); a task folder needs task.yml") from None
    try:
        spec = msgspec.yaml.decode(raw, type=_TaskYml)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise TaskError(f"{yml}: {exc}") from None
    for needed in ("reference.py", "task.py"):
        if not (folder / needed).is_file():
            raise TaskError(f"{folder / needed}: missing; the folder format needs it")
    modules: dict[str, str] = {}
    for entry in spec.files:
        if entry.source == "@SUBMISSION@" or not entry.name.endswith(".py"):
            continue
        file = (folder / entry.source).resolve()
        if not file.is_file():
            raise TaskError(f"{yml}: files entry {entry.name!r} points at {file}, which does not exist")
        modules[entry.name[:-3]] = str(file)
    modules.setdefault("task", str(folder / "task.py"))
    modules.setdefault("reference", str(folder / "reference.py"))
    tests = [_shape(t, f"{yml} tests") for t in spec.tests]
    benchmarks = [_shape(b, f"{yml} benchmarks") for b in spec.benchmarks]
    if not tests or not benchmarks:
        raise TaskError(f"{yml}: needs non-empty tests: and benchmarks: lists")
    seed_file = folder / "submission.py"
    return Task(
        name=folder.name.replace("_", "-"),
        path=str(folder),
        description=spec.description.strip(),
        tests=tests,
        benchmarks=benchmarks,
        ranking_by=spec.ranking_by,
        check_shapes=derive_check_shapes(tests),
        seed_source=seed_file.read_text() if seed_file.is_file() else None,
        modules=modules,
    )


def _scaled(t: Shape) -> tuple[Shape, frozenset[str]]:
    """A small shape with the same edge-case features as test ``t``, and those features."""
    kb = -(-t.k // 128)
    m = 96 if t.m % 64 else 64
    n = 64 if t.n == 64 else (192 if t.n % 128 == 64 else 128)
    k = 128 if kb == 1 else 256
    feats = {"m%64" if t.m % 64 else "m64", "n%128==64" if t.n % 128 == 64 else "n%128==0"}
    feats.add("one k block" if kb == 1 else "several k blocks")
    if n > 128:
        feats.add("several b_scale rows")
    return Shape(m, n, k, t.seed), frozenset(feats)


def derive_check_shapes(tests: list[Shape]) -> list[Shape]:
    """Greedy cover of the tests' edge-case features by the cheapest scaled shapes.

    The interpreter costs roughly m*n*k; each step takes the shape adding the most uncovered
    features per square root of work (the root favours one shape covering three features over two
    shapes covering them piecemeal). Ties go to test order, so the result is deterministic.
    """
    candidates: dict[tuple[int, int, int], tuple[Shape, frozenset[str]]] = {}
    for t in tests:
        s, f = _scaled(t)
        candidates.setdefault((s.m, s.n, s.k), (s, f))
    wanted = frozenset().union(*(f for _, f in candidates.values()))
    chosen: list[Shape] = []
    covered: set[str] = set()
    while covered != wanted:
        best = max(candidates.values(), key=lambda c: len(c[1] - covered) / (c[0].m * c[0].n * c[0].k) ** 0.5)
        chosen.append(best[0])
        covered |= best[1]
    return chosen


def geomean(values: list[float]) -> float:
    """The task's score over its ranked shapes: the geometric mean of the per-shape times."""
    return math.exp(sum(math.log(v) for v in values) / len(values))


def mix_seed(seed: int, secret_seed: int) -> int:
    """A test seed combined with the secret seed (as the public harness did), stable across runs."""
    digest = hashlib.blake2b(f"{seed}:{secret_seed}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


def import_reference(modules: dict[str, str], alias: str = "_ks_reference") -> types.ModuleType:
    """Load reference.py under a private name, with its helper modules (``task``, ``utils``)
    visible under their plain names only while it executes, then removed again from sys.modules,
    so nothing later (candidate code included) finds them by a plain ``import``."""
    saved = {name: sys.modules.get(name) for name in modules}
    try:
        for name, file in modules.items():
            if name == "reference":
                continue
            spec = importlib.util.spec_from_file_location(name, file)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        spec = importlib.util.spec_from_file_location(alias, modules["reference"])
        ref = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ref)
        return ref
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


def isolate_candidate(modules: dict[str, str], folder: Path) -> None:
    """Ready a candidate's working folder: the task's ``task.py`` beside it (submissions do
    ``from task import input_t``), and none of the harness's own modules importable by name."""
    shutil.copy(modules["task"], folder / "task.py")
    for name in ("reference", "utils", "task", "_ks_reference"):
        sys.modules.pop(name, None)


def import_submission(source: str, folder: Path):
    """Write ``source`` as submission.py in ``folder``, import it, and return its
    ``custom_kernel`` (None when it defines no callable of that name)."""
    path = folder / "submission.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    fn = getattr(module, "custom_kernel", None)
    return fn if callable(fn) else None


def tensor_bytes(t):
    """A tensor's bytes in logical order, for bit-exact comparison (flatten first: size-1 dims can
    keep odd strides)."""
    import torch

    return t.flatten().contiguous().view(torch.uint8)
