"""How many context components the CRF needs: real-error AP against the refit's seconds.

Each word's context vector reaches the CRF as ``context_dims`` real-valued features (PCA of the
MiniLM's middle layer; :data:`subregweigh.crf.CONTEXT_DIMS`). Each L-BFGS iteration reads every
feature of every word for every tag, so the components are most of CRFsuite's work: they set
how long the refresh between trainings waits for its CRF (``backend.jobs.refresh``). For each
number of components given: the product's CRF trained on CoNLL-2003 test as annotated, its own
AP against CoNLL++ and its mix with the cached scouts (3 scouts of 3 epochs, per seed); with
``--draws``, its mix with one cached scout on each seed's draw of that many sentences, and the
refit's seconds there (``FeatureTagger.refit``: CRFsuite alone, the projection kept, what a
refresh pays), median of 3::

    python -m benchmarks.exploration.crf_context_dims --cache /tmp/review-loop --draws 1000 \\
        --threads 2 64 32 16
"""

from __future__ import annotations

import numpy as np

from benchmarks import harness
from benchmarks.exploration import CRF_COLUMNS, crf_cells, crf_study, crf_study_parser, finish
from subregweigh.crf import FeatureTagger

NAME = "crf-context-dims"
REFITS = 3


def main(argv=None) -> int:
    parser = crf_study_parser(__doc__, NAME)
    parser.add_argument("dims", nargs="+", type=int, help="context components; 0: none")
    args = parser.parse_args(argv)
    study = crf_study(args)
    original = study.original
    rows = {}
    for dims in args.dims:
        crf_gold = FeatureTagger(context_dims=dims).fit(original).gold_proba(original)
        row = study.quality(crf_gold)
        drawn, seconds = [], []
        for examples, pick, gold in study.drawn():
            tagger = FeatureTagger(context_dims=dims).fit(examples)
            drawn.append(study.mix_on_draw(pick, gold, tagger.gold_proba(examples)))
            seconds.append(
                float(np.median([harness.timed(tagger.refit, examples)[1] for _ in range(REFITS)]))
            )
        if drawn:
            row["drawn"] = harness.summarize_rows(drawn, ["AP whole"])
            row["refit s"] = float(np.mean(seconds))
        rows[dims] = row
        print(f"{dims} components: {row}", flush=True)
    return finish(
        "crf_context_dims",
        args.name,
        argv,
        args,
        markdown(rows, study, args),
        rows={str(k): v for k, v in rows.items()},
    )


def markdown(rows: dict, study, args) -> list[str]:
    refits = (
        ", and the refit's seconds there (CRFsuite alone, the projection kept: what a refresh "
        f"waits for; the mean over the draws of the median of {REFITS}), this machine"
    )
    return [
        "## How many context components the CRF needs",
        "",
        study.intro("each number of context components", args.seeds, on_draws=refits) + ".",
        "",
        *harness.table(
            ["context components", *CRF_COLUMNS]
            + ([f"mix AP, {study.draws_name}", "refit s"] if study.draw_size else []),
            [
                [str(dims), *crf_cells(row)]
                + (
                    [harness.pm(row["drawn"]["AP whole"]), f"{row['refit s']:.2f}"]
                    if study.draw_size
                    else []
                )
                for dims, row in rows.items()
            ],
        ),
        "",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
