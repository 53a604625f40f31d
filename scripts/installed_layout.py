"""The installed package layout of a checkout, as links, for tools that read files rather than run
the installer's import hook.

The design's folders ``agents/``, ``blackboard/``, ``evaluator/`` and ``knowledge/`` sit at the top
of the repository but are installed as ``kernel_scientist.agents`` and so on (pyproject.toml,
package-dir; docs/decisions.md, "Package layout"). Python finds them through the installation; a
type checker, or a machine that cannot install anything (the GPU sessions' PYTHONPATH), needs the
layout on disk. This builds it in a folder: ``FOLDER/kernel_scientist`` whose entries link to the
checkout's ``kernel_scientist/`` files and to the four folders.

Usage: python scripts/installed_layout.py FOLDER          # build (replacing an earlier one)
       python scripts/installed_layout.py --mypy [ARGS]   # build in a temporary folder, run mypy there
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("agents", "blackboard", "evaluator", "knowledge")


def build(folder: Path) -> Path:
    """``folder/kernel_scientist`` as the installed package: links, nothing copied."""
    package = folder / "kernel_scientist"
    if package.is_symlink() or package.is_file():
        package.unlink()
    elif package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    for entry in (ROOT / "kernel_scientist").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for layer in LAYERS:
        (package / layer).symlink_to(ROOT / layer)
    return package


def mypy(args: list[str]) -> int:
    """mypy on the layout, with the checkout's settings; paths in its report point into the checkout."""
    with tempfile.TemporaryDirectory(prefix="ks-layout-") as tmp:
        build(Path(tmp))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--config-file",
                str(ROOT / "pyproject.toml"),
                "--cache-dir",
                str(ROOT / ".mypy_cache"),
                "-p",
                "kernel_scientist",
                *args,
            ],
            cwd=tmp,
            capture_output=True,
            text=True,
            env={**os.environ, "MYPYPATH": tmp},
        )
        out = proc.stdout
        for layer in LAYERS:  # kernel_scientist/agents/x.py is agents/x.py in the checkout
            out = out.replace(f"kernel_scientist/{layer}/", f"{layer}/")
        sys.stdout.write(out)
        sys.stderr.write(proc.stderr)
        return proc.returncode


def main(argv: list[str]) -> int:
    if argv[:1] == ["--mypy"]:
        return mypy(argv[1:])
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    print(build(Path(argv[0]).resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
