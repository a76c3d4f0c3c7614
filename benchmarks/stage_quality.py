"""What each version of a training is worth: real-error AP beside when it reaches Label Studio.

Nothing is trained here: two current results are read side by side.

* AP by stage, on CoNLL-2003 test against CoNLL++: the CRF alone, one scout with the CRF (the
  first scout's version), and three scouts with the CRF, at 1,000-sentence draws
  (``real-errors-300-1000-context-ensemble3``, 5 draws) and on the whole set of 3,453
  (``real-errors-three-scouts``, 3 seeds);
* the seconds from *Start Training* to each version's scores in Label Studio, from the scaling
  benchmark's first trainings (``scaling``) at 1,000 tasks and at 3,000 (the size measured
  nearest the whole set; 3,000 and 3,453 both train three scouts by default).

At 1,000 tasks the default trains one scout: its version with the CRF is the full one. A
project of the whole set's size publishes three: the CRF's, the first scout's with it, the three
scouts'.

    python -m benchmarks.stage_quality

Writes ``benchmarks/results/stage-quality.{json,md,png}``.
"""

from __future__ import annotations

import json
import sys

from benchmarks.harness import RESULTS, command, document, figure, pm, save, stamp, table

SMALL = "real-errors-300-1000-context-ensemble3"
WHOLE = "real-errors-three-scouts"
SCALING = "scaling"


def _read(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def stages() -> list[dict]:
    """One row per (size, stage): the AP (``mean_sd``) and the seconds to Label Studio."""
    small = _read(SMALL)["summary"]["1000"]["methods"]
    whole = _read(WHOLE)["summary"]["all"]["methods"]
    runs = {r["size"]: r for r in _read(SCALING)["runs"] if r.get("kind") == "first training"}
    rows = []
    for size, ap, times in (
        (1000, {"CRF alone": small["CRF alone"], "full": small["deterministic"]}, runs.get(1000)),
        (
            3000,
            {
                "CRF alone": whole["CRF alone"],
                "first scout": whole["one scout (SRW_SCOUTS=1)"],
                "full": whole["deterministic"],
            },
            runs.get(3000),
        ),
    ):
        if times is None:
            continue
        early = times.get("early_scores") or []
        seconds = {"CRF alone": early[0]["seconds"] if early else None}
        if len(early) > 1:
            seconds["first scout"] = early[1]["seconds"]
        seconds["full"] = times["refined_seconds"]
        for stage, stat in ap.items():
            rows.append(
                {
                    "size": size,
                    "stage": stage,
                    "ap": stat["ap"],
                    "seconds": seconds.get(stage),
                    "ap_source": SMALL if size == 1000 else WHOLE,
                }
            )
    return rows


LABELS = {
    "CRF alone": "the CRF alone",
    "first scout": "the first scout with the CRF",
    "full": "the full version",
}


def markdown(result: dict) -> str:
    lines = [
        "## What each version of a training is worth: real-error AP against seconds",
        "",
        "AP on CoNLL-2003 test against CoNLL++ (1,000 tasks: draws of 1,000 sentences, "
        f"`{SMALL}`; 3,000 tasks: the whole set of 3,453, `{WHOLE}`); seconds from *Start "
        f"Training* to the version's scores in Label Studio (`{SCALING}`, first trainings, "
        "2 CPU cores; an early version's by the backend's clock from the training's start, the "
        "full version's end to end). At 1,000 tasks the default trains one scout, whose version "
        "with the CRF is the full one; at 3,000, three.",
        "",
        *table(
            ["tasks", "version", "AP", "s to Label Studio"],
            [
                [
                    f"{r['size']:,}",
                    LABELS[r["stage"]],
                    pm(r["ap"]),
                    f"{r['seconds']:.1f}" if r["seconds"] is not None else "-",
                ]
                for r in result["rows"]
            ],
        ),
        "",
        "![AP against seconds](stage-quality.png)",
    ]
    return document(lines, result)


def plot(rows, path) -> None:
    with figure(path) as ax:
        for k, size in enumerate(sorted({r["size"] for r in rows})):
            mine = [r for r in rows if r["size"] == size and r["seconds"] is not None]
            xs, ys = [r["seconds"] for r in mine], [r["ap"]["mean"] for r in mine]
            errs = [r["ap"]["sd"] for r in mine]
            ax.errorbar(
                xs, ys, yerr=errs, marker="o", capsize=3, color=f"C{k}", label=f"{size:,} tasks"
            )
            for r, x, y in zip(mine, xs, ys):
                ax.annotate(
                    LABELS[r["stage"]],
                    (x, y),
                    textcoords="offset points",
                    xytext=(4, -10),
                    fontsize=7,
                )
        ax.set_xlabel("seconds from Start Training to the version's scores in Label Studio")
        ax.set_ylabel("AP on real errors")
        ax.legend(fontsize=8)


def main(argv=None) -> int:
    rows = stages()
    result = {**stamp(command("stage_quality", argv)), "rows": rows}
    text = markdown(result)
    save(RESULTS, "stage-quality", result, text)
    plot(rows, RESULTS / "stage-quality.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
