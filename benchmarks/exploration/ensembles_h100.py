"""Cheap ensembles on the whole CoNLL-2003 test set against CoNLL++, run on a lent H100.

What it measured (2026-11-25; benchmarks/results/ensembles-h100.md): per scout, the real-error
AP of the deterministic p(gold) after every epoch (snapshots), with MC dropout (x10) for two
seeds, and each scout's final per-word p(gold), from which ``--summarize`` computes the AP of seed
ensembles (p(gold) averaged over scouts before the min over words, as
``SubRegWeigh(n_scouts=N)`` does).

Run on the device over a copy of the working tree, with the MiniLM's weights carried as float16
in ``.gpu/model`` (the float32 file exceeds the 64 MiB transfer limit; they are cast back to
float32 before loading) and the two data files under ``.gpu/data``::

    PYTHONPATH=$PWD:$PWD/.gpu/site python3 -m benchmarks.exploration.ensembles_h100 \\
        --budget 420 --out $OUT "seed=0,mc=10;seed=1,mc=10;seed=2;epochs=2,seed=0;\\
        epochs=2,seed=1;epochs=2,seed=2;seed=3;seed=4;epochs=4,seed=0;epochs=4,seed=1;\\
        epochs=4,seed=2"
    python -m benchmarks.exploration.ensembles_h100 --summarize results2.pkl
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import pickle
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import average_precision_score

from benchmarks import harness
from subregweigh import scout as scout_module
from subregweigh.compare import differs
from subregweigh.io import read_conll
from subregweigh.scout import Scout

MODEL = Path("/tmp/minilm")


def float32_model() -> Path:
    """The carried float16 MiniLM, cast back to float32 in /tmp/minilm."""
    from safetensors.torch import load_file, save_file

    if not (MODEL / "model.safetensors").exists():
        MODEL.mkdir(exist_ok=True)
        for f in Path(".gpu/model").iterdir():
            if f.name != "model16.safetensors":
                (MODEL / f.name).write_bytes(f.read_bytes())
        weights = load_file(".gpu/model/model16.safetensors")
        save_file(
            {k: v.float().contiguous() for k, v in weights.items()},
            str(MODEL / "model.safetensors"),
            metadata={"format": "pt"},
        )
    return MODEL


def pair(data: Path):
    original = read_conll(data / "conll2003" / "eng.testb")
    return original, differs(original, read_conll(data / "conllpp" / "conllpp_test.txt"))


def gold(examples, labels, proba) -> list[np.ndarray]:
    index = {label: i for i, label in enumerate(labels)}
    return [
        p[np.arange(len(ex.label)), [index[t] for t in ex.label]].astype(np.float32)
        for p, ex in zip(proba, examples)
    ]


def ap(flags, per_word) -> float:
    return float(average_precision_score(flags, -np.array([w.min() for w in per_word])))


class Snapshots(logging.Handler):
    """At the scout's end-of-epoch log line: its per-word p(gold) then."""

    def __init__(self, examples):
        super().__init__()
        self.examples, self.scout, self.taken = examples, None, []

    def emit(self, record):
        if record.getMessage().startswith("epoch ") and self.scout is not None:
            s = self.scout
            s.model_.eval()
            self.taken.append(gold(self.examples, s.labels_, s.predict_proba(self.examples)))
            s.model_.train()


def sweep(plan: list[str], budget: float, out: Path) -> None:
    model = float32_model()
    examples, flags = pair(Path(os.environ.get("SUBREGWEIGH_DATA", ".gpu/data")))
    snapshots = Snapshots(examples)
    scout_module.logger.addHandler(snapshots)
    scout_module.logger.setLevel(logging.INFO)
    began, results = time.time(), {}
    for spec in plan:
        if time.time() - began > budget:
            print("budget spent; skipped", spec, flush=True)
            continue
        kw = dict(x.split("=") for x in spec.split(","))
        start, snapshots.taken = time.time(), []
        scout = Scout(
            model=str(model),
            task="ner",
            epochs=int(kw["epochs"]) if "epochs" in kw else None,
            random_state=int(kw.get("seed", 0)),
            progress=False,
        )
        snapshots.scout = scout
        scout.fit(examples)
        record = {"spec": spec, "snaps": list(snapshots.taken)}
        if int(kw.get("mc", 0)):
            scout.model_.train()  # dropout on: each pass another subnetwork
            runs = [
                gold(examples, scout.labels_, scout.predict_proba(examples))
                for _ in range(int(kw["mc"]))
            ]
            scout.model_.eval()
            record["mc"] = [np.mean(words, axis=0) for words in zip(*runs)]
        record["seconds"] = time.time() - start
        print(spec, f"{record['seconds']:.0f} s", [round(ap(flags, s), 3) for s in record["snaps"]])
        results[spec] = record
        with open(out / "results2.tmp", "wb") as f:
            pickle.dump(results, f)
        os.replace(out / "results2.tmp", out / "results2.pkl")


def summarize(path: Path, name: str = "ensembles-h100") -> dict:
    """The AP of each scout, of its snapshots and MC dropout, and of every seed ensemble."""
    results = pickle.loads(path.read_bytes())
    _, flags = pair(harness.DATA)
    final = {spec: r["snaps"][-1] for spec, r in results.items()}

    def ensemble(specs):
        return ap(flags, [np.mean(words, axis=0) for words in zip(*(final[s] for s in specs))])

    default = [s for s in final if not s.startswith("epochs=")]
    by_epochs = {e: [s for s in final if s.startswith(f"epochs={e},")] for e in (2, 4)}
    rows = {
        "one scout, 3 epochs (default)": [ap(flags, final[s]) for s in default],
        **{f"one scout, {e} epochs": [ap(flags, final[s]) for s in by_epochs[e]] for e in (2, 4)},
        **{
            f"ensemble of {n}, 3 epochs (every {n} of {len(default)})": [
                ensemble(c) for c in itertools.combinations(default, n)
            ]
            for n in (2, 3, len(default))
        },
        **{f"ensemble of 3, {e} epochs": [ensemble(by_epochs[e])] for e in (2, 4)},
        "last two epoch snapshots of one scout (3 epochs)": [
            ap(flags, [(a + b) / 2 for a, b in zip(*results[s]["snaps"][-2:])]) for s in default
        ],
        "MC dropout x10 (3 epochs)": [
            ap(flags, results[s]["mc"]) for s in default if "mc" in results[s]
        ],
    }
    summary = {k: harness.mean_sd(v) for k, v in rows.items()}
    lines = [
        "## Cheap ensembles: whole CoNLL-2003 test set against CoNLL++, AP (NVIDIA H100)",
        "",
        f"Base rate {flags.mean():.3f}. Runs: {', '.join(results)}. Exploration run of "
        "`benchmarks/exploration/ensembles_h100.py` (its docstring has the commands); the "
        "MiniLM's weights travelled as float16 and were cast back to float32.",
        "",
        *harness.table(
            ["score", "AP", "runs or combinations"],
            [[k, harness.pm(v), v["n"]] for k, v in summary.items()],
        ),
        "",
        f"Date: {harness.now()}.",
    ]
    result = {
        **harness.stamp(harness.command("exploration.ensembles_h100", ["--summarize", str(path)])),
        # the sweep's machine; the summary only reads its results
        "machine": "NVIDIA H100 80GB HBM3 (lent), 16 CPUs, torch 2.11.0+cu130, Python 3.12.3",
        "source": str(path),
        "summary": summary,
        "values": rows,
    }
    harness.save(harness.RESULTS, name, result, "\n".join(lines) + "\n")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("plan", nargs="?", help="runs separated by ';' (see above)")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds before stopping")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--summarize", type=Path, help="a results2.pkl to summarize")
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(args.summarize)["summary"])
    elif args.plan:
        sweep(args.plan.split(";"), args.budget, args.out)
    else:
        parser.error("give a plan or --summarize")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
