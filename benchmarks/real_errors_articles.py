"""Detection of REAL annotation errors by ARTICLE: CoNLL-2003 test's documents as tasks, each a
whole article (the sentences between two ``-DOCSTART-`` lines, joined: 231 articles, median
161 words, the longest 797), annotated with the original labels and ranked against CoNLL++
(Wang et al. 2019): an article is erroneous when any sentence of it differs (95 of 231, base
rate 0.411; 0.338 in the shortest third, 0.584 in the longest).

20 articles are longer than the MiniLM's 512 subwords in their deterministic segmentation (the
longest 867), more of them in subword-regularized ones: the scouts train on and read them
whole, in overlapping windows (:mod:`subregweigh.windows`). The
run is :mod:`benchmarks.real_errors`' (its options, scores and baselines, the product's
scouts and CRF as ``weigh`` builds them: ``SubRegWeigh(n_scouts=None)`` trains the scouts the
product trains on 231 tasks) on the articles, and then the length check: the articles sorted by
their words, the shortest third against the longest, each third's base rate, the AP within it
and the flag rate (the share of its articles scored under :data:`FLAG_BELOW`, the review
threshold) and the flags' precision. A score that doubts long texts for their length flags
more of the longest third than its errors warrant.

    python -m benchmarks.real_errors_articles --threads 1        # all 231 articles, 3 seeds

The sentence-level figure beside it is ``benchmarks/results/real-errors-three-scouts`` (the
headline of :mod:`benchmarks.real_errors`). By default OOF cleanlab is off (``--folds 0``)
and only the deterministic score is computed (``--scores deterministic``); ``--sizes 40``
draws 40 articles per seed (the tiny run of tests/repository).
"""

from __future__ import annotations

import bisect
import json

import numpy as np

from benchmarks import harness, real_errors
from subregweigh.compare import differs
from subregweigh.example import Example
from subregweigh.io.readers import read_lines

NAME = "real_errors_articles"
FLAG_BELOW = 0.5  # a task is flagged below it: the review threshold (report.review_summary)
SENTENCE_LEVEL = "real-errors-three-scouts"  # the sentence-level headline, beside this one
# the scores ranked in the length check: the product's and cleanlab's, each a probability
LENGTH_CHECKED = ("deterministic", "cleanlab in-sample", "cleanlab in-sample, softmin")
# model-free orders ranked in the length check too (AP alone: no score to flag under 0.5), so a
# third's AP reads beside what length alone does within it
LENGTH_BASELINES = ("length",)
THIRDS = ("shortest third", "longest third")


def parse_args(argv=None):
    parser = real_errors.build_parser(__doc__)
    parser.set_defaults(folds=0, scores=["deterministic"])
    args = parser.parse_args(argv)
    real_errors.check_args(parser, args)
    if args.data != "conllpp" or args.add_train:
        parser.error("articles are CoNLL-2003 test's: --data conllpp, no --add-train")
    if args.name is None:
        args.name = "real-errors-articles"
        args.name += "" if args.sizes == ["all"] else "-" + "-".join(args.sizes)
        args.name += real_errors.run_suffix(args)
    return args


def article_of_sentences(examples: list[Example]) -> list[int]:
    """Each sentence's article in its CoNLL file (``source``: "path:line"): how many
    ``-DOCSTART-`` lines come before it, shape (n,). eng.testb has its first ``-DOCSTART-``
    moved to the end, conllpp_test.txt starts with one: both count from 0 after
    :func:`articles`' renumbering."""
    path = examples[0].source.rsplit(":", 1)[0]
    starts = [i for i, line in enumerate(read_lines(path), 1) if line.startswith("-DOCSTART-")]
    return [bisect.bisect(starts, int(ex.source.rsplit(":", 1)[1])) for ex in examples]


def articles(examples: list[Example]) -> list[list[int]]:
    """The sentence indices of each article, in file order (no article empty)."""
    groups: dict[int, list[int]] = {}
    for i, article in enumerate(article_of_sentences(examples)):
        groups.setdefault(article, []).append(i)
    return list(groups.values())


def join(examples: list[Example], members: list[int], article: int) -> Example:
    """The article of sentences ``members``: their words and tags in order, one task."""
    return Example(
        str(article),
        tuple(w for i in members for w in examples[i].words),
        tuple(t for i in members for t in examples[i].label),
        examples[members[0]].source,
    )


def load_pair():
    """``(original, corrected, flags)`` as :func:`benchmarks.real_errors.load_pair`'s, by
    article: CoNLL-2003 test's 231 articles as annotated and as corrected, and which differ
    (any sentence of it), bool shape (n,)."""
    original, corrected, sentence_flags = real_errors.load_pair()
    groups = articles(original)
    if groups != articles(corrected):
        raise ValueError("CoNLL-2003 test and CoNLL++ cut their sentences into other articles")
    joined = [join(original, g, k) for k, g in enumerate(groups)]
    fixed = [join(corrected, g, k) for k, g in enumerate(groups)]
    flags = differs(joined, fixed)
    assert all(flags[k] == sentence_flags[g].any() for k, g in enumerate(groups))
    return joined, fixed, flags


def length_check(examples: list[Example], scores: dict, flags) -> dict:
    """Of :data:`LENGTH_CHECKED` scores present, in the shortest and the longest third of the
    articles by words: ``n``, ``words`` (median), ``base_rate``, and per score ``ap`` (NaN
    when the third holds no error or only errors), ``flag_rate`` (share under
    :data:`FLAG_BELOW`) and ``flag_precision`` (errors among the flagged; NaN when none); of
    :data:`LENGTH_BASELINES` present, ``ap`` alone."""
    flags = np.asarray(flags, dtype=bool)
    words = np.array([len(ex.words) for ex in examples])
    order = np.argsort(words, kind="stable")
    third = len(order) // 3
    out = {}
    for name, pick in zip(THIRDS, (order[:third], order[len(order) - third :]), strict=True):
        these = flags[pick]
        out[name] = {
            "n": int(len(pick)),
            "words": float(np.median(words[pick])),
            "base_rate": float(these.mean()),
            "scores": {},
        }
        for score in (s for s in LENGTH_CHECKED if s in scores):
            quality = np.asarray(scores[score][0], dtype=float)[pick]
            flagged = quality < FLAG_BELOW
            out[name]["scores"][score] = {
                "ap": harness.ranking(quality, these)["ap"],
                "flag_rate": float(flagged.mean()),
                "flag_precision": float(these[flagged].mean()) if flagged.any() else float("nan"),
            }
        for score in (s for s in LENGTH_BASELINES if s in scores):
            quality = np.asarray(scores[score][0], dtype=float)[pick]
            out[name]["scores"][score] = {"ap": harness.ranking(quality, these)["ap"]}
    return out


def run_one(args, size: str, seed: int, pair) -> dict:
    scored = real_errors.score_run(args, size, seed, pair)
    words = [len(ex.words) for ex in scored.examples]
    return {
        **scored.run,
        "median_words": float(np.median(words)),
        "max_words": int(max(words)),
        "methods": real_errors.methods_of(scored.scores, scored.flags, scored.kinds),
        "length_check": length_check(scored.examples, scored.scores, scored.flags),
    }


def summarize(runs) -> dict:
    """:func:`benchmarks.real_errors.summarize`'s, and per size the length check's mean ± sd."""
    out = real_errors.summarize(runs)
    for size, s in out.items():
        these = [r for r in runs if r["size"] == size]
        s["median_words"] = harness.mean_sd([r["median_words"] for r in these])
        s["length_check"] = {
            third: {
                **{
                    key: harness.mean_sd([r["length_check"][third][key] for r in these])
                    for key in ("n", "words", "base_rate")
                },
                "scores": {
                    score: harness.summarize_rows(
                        [r["length_check"][third]["scores"][score] for r in these],
                        ("ap", "flag_rate", "flag_precision"),
                    )
                    for score in these[0]["length_check"][third]["scores"]
                },
            }
            for third in THIRDS
        }
    return out


def sentence_level() -> dict | None:
    """The sentence-level headline's whole-set summary (:data:`SENTENCE_LEVEL`), or None."""
    path = harness.RESULTS / f"{SENTENCE_LEVEL}.json"
    if not path.exists():
        return None
    result = json.loads(path.read_text())
    return {"command": result["command"], **result["summary"]["all"]}


def length_table(check: dict) -> list[str]:
    rows = []
    for score in check[THIRDS[0]]["scores"]:
        row = [score]
        for third in THIRDS:
            m = check[third]["scores"][score]
            row += [harness.pm(m[key]) if key in m else "n/a" for key in ("ap", "flag_rate")]
            row.append(harness.pm(m["flag_precision"]) if "flag_precision" in m else "n/a")
        rows.append(row)
    header = ["score"]
    for third in THIRDS:
        header += [f"{third}: AP", "flag rate", "flags' precision"]
    return harness.table(header, rows)


def markdown(result) -> str:
    cfg = result["config"]
    lines = [
        "## Real errors by article: CoNLL-2003 test (original) against CoNLL++ (corrected)",
        "",
        "Each task is a whole article (its sentences joined), read in overlapping windows "
        "where it is longer than the encoder's 512 subwords; an article is erroneous when a "
        f"sentence of it is. Scout: {cfg['model'] or 'the offline MiniLM'}, epochs "
        f"{cfg['epochs'] or 'default'}, {cfg['scouts']} scout"
        + ("s, their p(gold) averaged" if cfg["scouts"] > 1 else "")
        + (" (--ensemble)" if cfg.get("ensemble") else " (the product's number for this size)")
        + ("; the deterministic score averages it with a CRF's (half each)" if cfg["crf"] else "")
        + f"; soft minimum at temperature {cfg['softmin_temperature']:g}; cleanlab OOF "
        f"{cfg['folds']} folds. Mean ± sd over {cfg['seeds']} seeds. Lower score = more "
        "doubtful.",
    ]
    for size, s in result["summary"].items():
        lines += real_errors.size_section(
            s,
            f"### {'Every article' if size == 'all' else f'{size} articles'} ({s['n']} "
            f"articles, median {s['median_words']['mean']:.0f} words, base rate "
            f"{harness.pm(s['base_rate'])}, {harness.pm(s['n_errors'], 1)} erroneous)",
        )
        check = s["length_check"]
        lines += [
            "",
            "Length check: the articles sorted by words, "
            + "; ".join(
                f"the {third} {check[third]['n']['mean']:.0f} articles, median "
                f"{check[third]['words']['mean']:.0f} words, base rate "
                f"{harness.pm(check[third]['base_rate'])}"
                for third in THIRDS
            )
            + f". Flag rate: the share scored under {FLAG_BELOW:g}; flags' precision: the "
            "erroneous share of the flagged.",
            "",
            *length_table(check),
        ]
    sentences = result.get("sentence_level")
    if sentences:
        det = sentences["methods"]["deterministic"]
        lines += [
            "",
            f"Sentence level ({SENTENCE_LEVEL}, `{sentences['command']}`): "
            f"{sentences['n']} sentences, base rate {harness.pm(sentences['base_rate'])}, "
            f"the deterministic score's AP {harness.pm(det['ap'])}, AUROC "
            f"{harness.pm(det['auroc'])}.",
        ]
    return harness.document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    harness.start(args.threads)
    extra = {"sentence_level": sentence_level()}
    real_errors.run_planned(args, argv, NAME, load_pair(), run_one, summarize, markdown, extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
