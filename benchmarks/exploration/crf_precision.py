"""The CRF's context vectors in bfloat16: what they cost in real-error AP, and what they save.

The context vectors (``subregweigh.crf.context_vectors``: the pretrained MiniLM cut at its
middle layer, run over every text) are a fixed cost of each CRF training: some 35 s of 2 cores
at 14,041 CoNLL sentences. For each precision given (``float32``, ``bfloat16``, ``auto``):
the vectors' seconds on the whole real-error set (3,453 sentences) and on CoNLL++ train
(14,041), and the product's CRF (``FeatureTagger(precision=...)``, the default iterations)
trained on the whole set as annotated: its own AP against CoNLL++, its mix with the cached
scouts (3 seeds of 3 scouts of 3 epochs) and, with ``--draws``, with one cached scout on each
seed's draw of that many sentences::

    python -m benchmarks.exploration.crf_precision --cache /tmp/review-loop --draws 1000 \\
        float32 bfloat16
"""

from __future__ import annotations

from benchmarks import harness
from benchmarks.exploration import CRF_COLUMNS, crf_cells, crf_study, crf_study_parser, finish
from subregweigh.crf import FeatureTagger, context_vectors
from subregweigh.options import PRECISIONS

NAME = "crf-precision"


def vector_seconds(texts, precision: str) -> float:
    return harness.timed(context_vectors, texts, precision=precision)[1]


def main(argv=None) -> int:
    parser = crf_study_parser(__doc__, NAME)
    parser.add_argument("precisions", nargs="+", choices=PRECISIONS)
    args = parser.parse_args(argv)
    study = crf_study(args)
    original = study.original
    _, train = harness.read_dataset("conll")
    rows = {}
    for precision in args.precisions:
        row = {
            "vectors s whole set": vector_seconds([ex.words for ex in original], precision),
            "vectors s 14041": vector_seconds([ex.words for ex in train], precision),
        }
        crf_gold = FeatureTagger(precision=precision).fit(original).gold_proba(original)
        row |= study.quality(crf_gold)
        drawn = []
        for examples, pick, gold in study.drawn():
            crf = FeatureTagger(precision=precision).fit(examples).gold_proba(examples)
            drawn.append(study.mix_on_draw(pick, gold, crf))
        if drawn:
            row["drawn"] = harness.summarize_rows(drawn, ["AP whole"])
        rows[precision] = row
        print(f"{precision}: {row}", flush=True)
    return finish("crf_precision", args.name, argv, args, markdown(rows, study, args), rows=rows)


def markdown(rows: dict, study, args) -> list[str]:
    return [
        "## The CRF's context vectors in bfloat16",
        "",
        study.intro("its context vectors computed at each precision", args.seeds)
        + ". Seconds: the vectors alone, on the whole set (3,453 sentences) and on CoNLL++ "
        "train (14,041), this machine.",
        "",
        *harness.table(
            ["precision", *CRF_COLUMNS]
            + ([f"mix AP, {study.draws_name}"] if study.draw_size else [])
            + ["vectors s, 3,453", "vectors s, 14,041"],
            [
                [precision, *crf_cells(row)]
                + ([harness.pm(row["drawn"]["AP whole"])] if study.draw_size else [])
                + [f"{row['vectors s whole set']:.1f}", f"{row['vectors s 14041']:.1f}"]
                for precision, row in rows.items()
            ],
        ),
        "",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
