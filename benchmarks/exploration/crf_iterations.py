"""What the CRF's L-BFGS iterations buy: real-error AP and held-out F1 against its seconds.

CRFsuite trains until its convergence test stops it; its time grows faster than the data (about
4.5 minutes at 14,041 sentences on 2 cores, after the scout: the full version's largest cost
there). This compares iteration caps:

- on CoNLL-2003 test as annotated (the real-error benchmark, 3,453 sentences): the CRF's own AP
  against CoNLL++ and the product's mix (half and half with the cached scouts of 3 seeds, 3
  members of 3 epochs each: ``benchmarks.review_loop``'s ``--cache``, as ``scout_budget`` left
  them), and CRFsuite's seconds;
- on CoNLL++ train (14,041 sentences, the scaling benchmark's largest project): CRFsuite's
  seconds and the tagger's entity F1 on CoNLL++ dev (seqeval), which says whether a capped
  tagger is still a converged one.

The context projection is fitted once per set and kept (``FeatureTagger.refit``): the seconds
are CRFsuite's training alone, what the cap changes::

    python -m benchmarks.exploration.crf_iterations --cache /tmp/review-loop 50 100 200 0
"""

from __future__ import annotations

import copy

from seqeval.metrics import f1_score

from benchmarks import harness
from benchmarks.exploration import (
    CRF_COLUMNS,
    EPOCHS,
    MEMBERS,
    crf_cells,
    crf_study,
    crf_study_parser,
    finish,
)
from benchmarks.real_errors import halves_base_rate
from subregweigh.crf import FeatureTagger

NAME = "crf-iterations"


def capped(tagger: FeatureTagger, cap: int, examples) -> tuple[FeatureTagger, float]:
    """``tagger``'s projection, CRFsuite trained again on ``examples`` with at most ``cap``
    iterations (0: until convergence); the new tagger and CRFsuite's seconds."""
    template = copy.copy(tagger)
    template.max_iterations = cap or None
    return harness.timed(template.refit, examples)


def draw_rows(args, study) -> dict:
    """Per cap, the mix's AP on ``args.draws`` sentences drawn per seed (the real-error
    benchmark's draws), each with one scout of the product's epochs trained on the draw, as the
    product trains one below 2,000 annotations; mean ± sd over the seeds, and CRFsuite's mean
    seconds."""
    rows: dict = {cap: [] for cap in args.caps}
    for seed, (examples, pick, gold) in enumerate(study.drawn()):
        base = FeatureTagger(max_iterations=1).fit(examples)
        for cap in args.caps:
            tagger, seconds = capped(base, cap, examples)
            row = {"seconds": seconds, **study.mix_on_draw(pick, gold, tagger.gold_proba(examples))}
            rows[cap].append(row)
            print(f"{args.draws} drawn, seed {seed}, cap {cap}: {row}", flush=True)
    return {cap: harness.summarize_rows(runs, list(runs[0])) for cap, runs in rows.items()}


def main(argv=None) -> int:
    parser = crf_study_parser(__doc__, NAME)
    parser.add_argument("caps", nargs="+", type=int, help="iteration caps; 0: none")
    parser.add_argument("--skip-train", action="store_true", help="the real-error rows alone")
    args = parser.parse_args(argv)
    study = crf_study(args)
    original, flags = study.original, study.flags
    base = FeatureTagger(max_iterations=1).fit(original)  # the projection alone
    real: dict = {}
    for cap in args.caps:
        tagger, seconds = capped(base, cap, original)
        row = {
            "seconds": seconds,
            **study.quality(tagger.gold_proba(original)),
        }
        real[cap] = row
        print(f"real errors, cap {cap}: {row}", flush=True)

    drawn: dict = {}
    if args.draws:
        drawn = draw_rows(args, study)

    large: dict = {}
    if not args.skip_train:
        _, train = harness.read_dataset("conll")
        _, dev = harness.read_dataset("conllpp-dev")
        base = FeatureTagger(max_iterations=1).fit(train)
        for cap in args.caps:
            tagger, seconds = capped(base, cap, train)
            predicted = [list(tags) for tags in tagger.predict(dev)]
            f1 = f1_score([list(ex.label) for ex in dev], predicted)
            large[cap] = {"seconds": seconds, "dev F1": float(f1)}
            print(f"CoNLL++ train, cap {cap}: {large[cap]}", flush=True)

    return finish(
        "crf_iterations",
        args.name,
        argv,
        args,
        markdown(real, drawn, large, flags, args),
        real_errors={str(k): v for k, v in real.items()},
        drawn={str(k): v for k, v in drawn.items()},
        conll_train={str(k): v for k, v in large.items()},
    )


def markdown(real: dict, drawn: dict, large: dict, flags, args) -> list[str]:
    def name(cap):
        return f"{cap}" if cap else "until converged (the default)"

    lines = [
        "## What the CRF's iterations buy",
        "",
        f"CoNLL-2003 test against CoNLL++. {halves_base_rate(flags)} The CRF's own AP, and the "
        f"product's mix with {MEMBERS} scouts of {EPOCHS} epochs (mean ± sd over {args.seeds} "
        "seeds of the scouts; the CRF is deterministic). Seconds: CRFsuite's training alone "
        "(the context projection kept), on this machine.",
        "",
        *harness.table(
            ["L-BFGS iterations", *CRF_COLUMNS, "s"],
            [[name(cap), *crf_cells(row), f"{row['seconds']:.1f}"] for cap, row in real.items()],
        ),
        "",
    ]
    if drawn:
        lines += [
            f"{args.draws} sentences drawn per seed (the real-error benchmark's draws), one "
            f"scout of {EPOCHS} epochs each, as the product trains below 2,000 annotations: "
            f"the mix's AP, mean ± sd over {args.seeds} seeds, and CRFsuite's mean seconds.",
            "",
            *harness.table(
                ["L-BFGS iterations", "mix AP", "s"],
                [
                    [name(cap), harness.pm(row["AP whole"]), f"{row['seconds']['mean']:.1f}"]
                    for cap, row in drawn.items()
                ],
            ),
            "",
        ]
    if large:
        lines += [
            "CoNLL++ train (14,041 sentences): CRFsuite's seconds and the tagger's entity F1 "
            "on CoNLL++ dev.",
            "",
            *harness.table(
                ["L-BFGS iterations", "dev F1", "s"],
                [
                    [name(cap), f"{row['dev F1']:.4f}", f"{row['seconds']:.1f}"]
                    for cap, row in large.items()
                ],
            ),
            "",
        ]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
