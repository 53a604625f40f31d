"""`lower`: a PyTorch seed lowered by Inductor into a Triton submission (docs/problem-folders.md).

Prints the submission, or writes it to --out; a summary line goes to stderr. Exit code 0 when the
seed was lowered, 1 when Inductor cannot give one module for every shape (the line says why), 2 on
bad usage. Nothing is written but --out.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from ._args import Subparsers, UsageError, add_force, check_output, positive_float


def add(sub: Subparsers) -> None:
    lo = sub.add_parser("lower", help="lower a PyTorch seed with Inductor into a Triton submission")
    lo.add_argument("task", type=Path, help="the problem folder (GPU MODE's format, docs/problem-folders.md)")
    lo.add_argument(
        "--seed", type=Path, default=None, help="the PyTorch submission to lower (default: the folder's submission.py)"
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
    if not any(isinstance(n, ast.FunctionDef) and n.name == "custom_kernel" for n in tree.body):
        raise UsageError(f"{seed}: defines no custom_kernel, so it is not a submission")
    return source


def _lower(args: argparse.Namespace) -> int:
    from kernel_scientist.evaluator import load_task
    from kernel_scientist.knowledge.lowering import is_pytorch_only
    from kernel_scientist.lower import LoweringError, lower_seed

    task = load_task(args.task)
    seed = args.seed or Path(task.path) / "submission.py"
    if not seed.is_file():
        raise UsageError(f"{seed}: no such file (pass the PyTorch submission with --seed)")
    source = _python(seed)
    if not is_pytorch_only(source):
        raise UsageError(f"{seed}: has a kernel of its own (Triton or an extension); only a PyTorch seed is lowered")
    if args.out is not None:
        check_output("--out", args.out, args.force)
    try:
        lowered = lower_seed(task, source, seed.name, timeout_s=args.timeout)
    except LoweringError as exc:
        print(f"kernel-scientist: {seed.name} was not lowered: {exc}", file=sys.stderr)
        return 1
    kept = ", ".join(lowered.library_calls) or "none"
    summary = f"{len(lowered.kernels)} Triton kernel(s) ({', '.join(lowered.kernels)}); library calls kept: {kept}"
    if args.out is None:
        sys.stdout.write(lowered.source)
        print(f"lowered {seed.name}: {summary}", file=sys.stderr)
    else:
        args.out.write_text(lowered.source)
        print(f"lowered {seed.name} into {args.out}: {summary}", file=sys.stderr)
        print(f"check it: kernel-scientist evaluate {args.out} --task {args.task}", file=sys.stderr)
    return 0
