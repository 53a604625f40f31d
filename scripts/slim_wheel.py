"""Re-pack a wheel without some of its folders, for a machine that can only receive a few MiB.

Ray's wheel is about 79 MB, most of it what the Ray backend never runs: the Java jar (32 MB
compressed), the dashboard's web client, and the libraries built on Ray Core (RLlib, Serve, Data,
Train, Tune, LLM). The GPU machines cannot reach a registry and take 64 MiB per call, repository
included. This writes a copy without the named top-level paths and with a RECORD that lists only
what is left (pip checks nothing else), under the same file name, so ``pip install --no-index``
installs it as the original.

    python scripts/slim_wheel.py ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl --out .whlray \\
        --drop ray/jars ray/dashboard/client ray/rllib ray/serve ray/data ray/train ray/tune ray/llm
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path


def slim(wheel: Path, out: Path, drop: list[str]) -> Path:
    prefixes = tuple(d.rstrip("/") + "/" for d in drop)
    target = out / wheel.name
    if target.resolve() == wheel.resolve():
        raise SystemExit(f"slim_wheel: --out {out} would overwrite {wheel}; pick another folder")
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        kept = [i for i in src.infolist() if not i.filename.startswith(prefixes)]
        names = {i.filename for i in kept}
        for info in kept:
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines()
                data = "".join(
                    ln + "\n" for ln in lines if ln.split(",", 1)[0] in names or ln.split(",", 1)[0] == info.filename
                ).encode()
            dst.writestr(info, data)
    return target


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("wheel", type=Path)
    p.add_argument("--out", type=Path, required=True, help="the folder for the slimmed wheel")
    p.add_argument("--drop", nargs="+", required=True, metavar="PATH", help="top-level paths inside the wheel")
    args = p.parse_args()
    if not args.wheel.is_file():
        raise SystemExit(f"slim_wheel: {args.wheel} is not a file")
    target = slim(args.wheel, args.out, args.drop)
    print(f"{target}: {target.stat().st_size / 2**20:.1f} MiB (from {args.wheel.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
