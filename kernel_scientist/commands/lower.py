"""`lower`: a PyTorch seed, or with --reference the folder's reference.py, lowered by Inductor into
a Triton submission (docs/problem-folders.md).

Prints the submission, or writes it to --out; a summary line goes to stderr. Exit code 0 when it
was lowered, 1 when Inductor cannot give one module for every shape (the line says why), 2 on bad
usage (a seed with a kernel of its own, a reference with no ref_kernel ...). Nothing is written but
--out.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ._args import Subparsers, UsageError, add_force, check_output, positive_float

if TYPE_CHECKING:
    from kernel_scientist.evaluator import Task


def add(sub: Subparsers) -> None:
    lo = sub.add_parser("lower", help="lower a PyTorch seed (or the reference) with Inductor into Triton")
    lo.add_argument("task", type=Path, help="the problem folder (GPU MODE's format, docs/problem-folders.md)")
    which = lo.add_mutually_exclusive_group()
    which.add_argument(
        "--seed", type=Path, default=None, help="the PyTorch submission to lower (default: the folder's submission.py)"
    )
    which.add_argument(
        "--reference",
        action="store_true",
        help="lower the folder's reference.py (its ref_kernel) instead: what a campaign whose seed failed starts from",
    )
    lo.add_argument("--out", type=Path, default=None, help="write the submission here (default: print it)")
    lo.add_argument(
        "--timeout", type=positive_float, default=300.0, help="wall seconds for Inductor (default: %(default)g s)"
    )
    add_force(lo, "an existing --out file")
    lo.set_defaults(handler=_lower, on_interrupt=lambda args: "interrupted while lowering; nothing was written")


def _python(seed: Path) -> str:
    """The seed's text, refused in one line unless it is Python that defines ``custom_kernel``."""
    try:
        source = seed.read_bytes().decode()
        tree = ast.parse(source)
    except UnicodeDecodeError:
        raise UsageError(f"{seed}: not a text file; pass the PyTorch submission with --seed") from None
    except SyntaxError as exc:
        raise UsageError(f"{seed}: not Python (line {exc.lineno}: {exc.msg})") from None
    except OSError as exc:
        raise UsageError(f"{seed}: cannot read ({exc.strerror})") from None
    defines = any(isinstance(n, ast.FunctionDef) and n.name == "custom_kernel" for n in tree.body) or any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "custom_kernel" for t in n.targets)
        for n in tree.body
    )  # ``custom_kernel = torch.compile(...)`` is a submission too
    if not defines:
        raise UsageError(f"{seed}: defines no custom_kernel, so it is not a submission")
    return source


def _seed(args: argparse.Namespace, task: Task) -> tuple[str, str]:
    """The seed to lower (--seed, else the folder's submission.py): its file name and text."""
    from kernel_scientist.knowledge.lowering import is_pytorch_only

    seed = args.seed or Path(task.path) / "submission.py"
    if not seed.is_file():
        raise UsageError(f"{seed}: no such file (pass the PyTorch submission with --seed)")
    source = _python(seed)
    if not is_pytorch_only(source):
        raise UsageError(f"{seed}: has a kernel of its own (Triton or an extension); only a PyTorch seed is lowered")
    return seed.name, source


def _reference(task: Task) -> tuple[str, str]:
    """The folder's reference.py as a submission (what a campaign whose seed failed lowers)."""
    from kernel_scientist.lower import REFERENCE_NAME, LoweringError, reference_seed

    try:
        return REFERENCE_NAME, reference_seed(task)
    except LoweringError as exc:
        raise UsageError(f"{task.path}: {exc}; nothing to lower") from None


def _lower(args: argparse.Namespace) -> int:
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.lower import LoweringError, lower_seed

    task = load_task(args.task)
    name, source = _reference(task) if args.reference else _seed(args, task)
    if args.out is not None:
        check_output("--out", args.out, args.force)
    try:
        lowered = lower_seed(task, source, name, timeout_s=args.timeout)
    except LoweringError as exc:
        print(f"kernel-scientist: {name} was not lowered: {exc}", file=sys.stderr)
        return 1
    kept = ", ".join(lowered.library_calls) or "none"
    summary = f"{len(lowered.kernels)} Triton kernel(s) ({', '.join(lowered.kernels)}); library calls kept: {kept}"
    if args.out is None:
        sys.stdout.write(lowered.source)
        print(f"lowered {name}: {summary}", file=sys.stderr)
    else:
        args.out.write_text(lowered.source)
        print(f"lowered {name} into {args.out}: {summary}", file=sys.stderr)
        print(f"check it: kernel-scientist evaluate {args.out} --task {args.task}", file=sys.stderr)
    return 0
