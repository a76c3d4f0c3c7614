"""Where in a flagged sentence the error is: does the scout point at what the correction changed,
and does it suggest the correction?

A reviewer reads a flagged sentence, not a score: the queue helps most when the doubt points at
the region to fix and the scout's own tagging is the fix. For the scouts that
``benchmarks.exploration.scout_schedule`` cached (the default schedule, 3 seeds, trained on
CoNLL-2003 test as annotated), over the sentences among the twice-as-many-as-errors most
doubtful by the served score until 2026-11-27 (the soft minimum over the words), it measures:

* for the erroneous ones (CoNLL++ changed their tags): whether the most doubtful word (lowest
  p(gold)) lies in a changed region (the words of every span the correction added, removed,
  retyped or moved, ``subregweigh.compare.span_changes``), whether any word under p(gold) 0.5
  does, and whether the scout's tagging on the ordinary segmentation equals the correction on
  the changed regions (what a reviewer is shown as the suggestion) or on the whole sentence;
* for the correct ones: whether the scout's tagging differs from the annotation at all, i.e. a
  suggestion a reviewer must reject.

It trains nothing::

    python -m benchmarks.exploration.scout_schedule --cache /tmp/review-loop 3
    python -m benchmarks.exploration.localisation --cache /tmp/review-loop
"""

from __future__ import annotations

import numpy as np

from benchmarks import harness
from benchmarks.exploration import cache_parser, finish
from benchmarks.real_errors import load_pair
from benchmarks.review_loop import cache_file, cached_outputs, whole_set_settings
from subregweigh.compare import CHANGE_KINDS, span_changes
from subregweigh.options import SOFTMIN_TEMPERATURE
from subregweigh.scores import soft_minimum

NAME = "localisation"
DOUBT = 0.5  # a word the scout doubts: p(gold) below this


def changed_region(original, corrected) -> np.ndarray:
    """The words of every span a correction changed, bool array of shape (n_words,)."""
    region = np.zeros(len(original), dtype=bool)
    for change in span_changes(original, corrected):
        for span in (change.original, change.corrected):
            if span is not None:
                region[span[1] : span[2]] = True
    return region


def error_row(gold, tags, original, corrected) -> dict:
    """What the scout says of one erroneous sentence: see the module's docstring."""
    region = changed_region(original, corrected)
    kinds = {c.kind for c in span_changes(original, corrected)}
    return {
        "lowest word in a changed region": bool(region[int(np.argmin(gold))]),
        f"a word under {DOUBT} in a changed region": bool((region & (gold < DOUBT)).any()),
        "suggestion = correction, changed regions": all(
            t == c for t, c, r in zip(tags, corrected, region, strict=True) if r
        ),
        "suggestion = correction, whole sentence": list(tags) == list(corrected),
        **{f"kind: {kind}": kind in kinds for kind in CHANGE_KINDS},
    }


def main(argv=None) -> int:
    args = cache_parser(__doc__).parse_args(argv)
    original, corrected, flags = load_pair()
    budget = 2 * int(flags.sum())
    errors_rows, correct_rows, per_kind = [], [], {kind: [] for kind in CHANGE_KINDS}
    for seed in range(args.seeds):
        gold, tags, _ = cached_outputs(
            cache_file(whole_set_settings(args.cache, 3), seed), original
        )
        quality = np.array([soft_minimum(g, SOFTMIN_TEMPERATURE) for g in gold])
        top = np.argsort(quality, kind="stable")[:budget]
        rows = [
            error_row(gold[i], tags[i], original[i].label, corrected[i].label)
            for i in top
            if flags[i]
        ]
        keys = [k for k in rows[0] if not k.startswith("kind: ")]
        errors_rows.append(
            {"n": len(rows), **{k: float(np.mean([r[k] for r in rows])) for k in keys}}
        )
        for kind in CHANGE_KINDS:
            of_kind = [r for r in rows if r[f"kind: {kind}"]]
            per_kind[kind].append(
                {
                    "n": len(of_kind),
                    **{k: float(np.mean([r[k] for r in of_kind])) for k in keys if of_kind},
                }
            )
        clean = [i for i in top if not flags[i]]
        correct_rows.append(
            {
                "n": len(clean),
                "suggests a change": float(
                    np.mean([list(tags[i]) != list(original[i].label) for i in clean])
                ),
            }
        )
    keys = [k for k in errors_rows[0] if k != "n"]
    summary = {
        "errors": harness.summarize_rows(errors_rows, ["n", *keys]),
        "by kind": {
            kind: harness.summarize_rows(rows, list(rows[0])) for kind, rows in per_kind.items()
        },
        "correct": harness.summarize_rows(correct_rows, ["n", "suggests a change"]),
    }
    lines = [
        "## Where the error is in a flagged sentence: CoNLL-2003 test against CoNLL++",
        "",
        f"Per seed ({args.seeds}), the sentences among the {budget} most doubtful by the served "
        f"score (the soft minimum at {SOFTMIN_TEMPERATURE}; twice the {int(flags.sum())} errors, "
        "where the review-loop target is read). *Changed region*: the words of every span the "
        "correction added, removed, retyped or moved. *Suggestion*: the scout's tagging of the "
        "ordinary segmentation. Mean ± sd over seeds.",
        "",
        "Erroneous sentences among them, all and by kind of change (a sentence can hold "
        "several kinds):",
        "",
        *harness.table(
            ["errors", "n", *keys],
            [
                ["all"]
                + [harness.pm(summary["errors"][k], 0 if k == "n" else 3) for k in ["n", *keys]],
                *[
                    [kind]
                    + [
                        harness.pm(stats[k], 0 if k == "n" else 3) if k in stats else ""
                        for k in ["n", *keys]
                    ]
                    for kind, stats in summary["by kind"].items()
                ],
            ],
        ),
        "",
        "Correct sentences among them (a suggestion there is one the reviewer rejects):",
        "",
        *harness.table(
            ["correct", "n", "suggests a change"],
            [
                [
                    "all",
                    harness.pm(summary["correct"]["n"], 0),
                    harness.pm(summary["correct"]["suggests a change"]),
                ]
            ],
        ),
        "",
    ]
    return finish(
        "localisation",
        NAME,
        argv,
        args,
        lines,
        summary=summary,
        values={"errors": errors_rows, "by kind": per_kind, "correct": correct_rows},
    )


if __name__ == "__main__":
    raise SystemExit(main())
