"""Entity-level scores: a text's score as the soft minimum over its annotated entities (each
once) and the words outside them, instead of over its words.

What it measures: for every scout that ``benchmarks.exploration.scout_schedule`` cached
(15: 3 seeds x 5 schedules, trained on CoNLL-2003 test as annotated), the real-error AP
(against CoNLL++) of the soft minimum over the words (the served score until 2026-11-27)
against the soft minimum over entity parts, an entity's words reduced to their mean (the
served score since, ``subregweigh.weigh.entity_parts``), their geometric mean, median or
minimum, at several temperatures, and with the scout's own entities over words the annotation
leaves outside as parts too. On the whole set and each half (a choice read on the other half),
with the paired difference from the words per scout. It trains nothing::

    python -m benchmarks.exploration.scout_schedule --cache /tmp/review-loop 3 5 3:1.5e-4 \\
        3:6e-4 5:1.5e-4
    python -m benchmarks.exploration.entity_parts --cache /tmp/review-loop
"""

from __future__ import annotations

import numpy as np

from benchmarks import harness
from benchmarks.exploration import cache_parser, finish, real_error_halves, schedule_scouts
from benchmarks.real_errors import halves_base_rate
from benchmarks.review_loop import cached_outputs
from subregweigh.options import SOFTMIN_TEMPERATURE
from subregweigh.scores import soft_minimum
from subregweigh.tags import entity_spans

NAME = "entity-parts"


def parts(gold, spans, reduce=np.mean, predicted=()) -> np.ndarray:
    """Each of ``spans`` reduced to one value of ``gold``, then each word outside them;
    ``predicted`` spans over words outside ``spans`` count as one part each too."""
    outside = np.ones(len(gold), dtype=bool)
    values = []
    for _, start, end in [*spans, *predicted]:
        if outside[start:end].all():
            outside[start:end] = False
            values.append(reduce(gold[start:end]))
    return np.array(values + list(gold[outside]))


def geometric_mean(x) -> float:
    return float(np.exp(np.mean(np.log(np.clip(x, 1e-12, 1.0)))))


T = SOFTMIN_TEMPERATURE
VARIANTS = {
    f"words, {T}": lambda g, s, t: soft_minimum(g, T),
    f"entity mean, {T} (served)": lambda g, s, t: soft_minimum(parts(g, s), T),
    f"entity geometric mean, {T}": lambda g, s, t: soft_minimum(parts(g, s, geometric_mean), T),
    f"entity median, {T}": lambda g, s, t: soft_minimum(parts(g, s, np.median), T),
    f"entity minimum, {T}": lambda g, s, t: soft_minimum(parts(g, s, np.min), T),
    "entity mean, 0.05": lambda g, s, t: soft_minimum(parts(g, s), 0.05),
    "entity mean, 0.15": lambda g, s, t: soft_minimum(parts(g, s), 0.15),
    "entity mean, 0 (lowest part)": lambda g, s, t: parts(g, s).min(),
    f"entity mean + the scout's entities, {T}": lambda g, s, t: soft_minimum(
        parts(g, s, predicted=entity_spans(t)), T
    ),
}


def main(argv=None) -> int:
    args = cache_parser(__doc__, seeds=False).parse_args(argv)
    original, flags, cuts = real_error_halves()
    spans = [entity_spans(ex.label) for ex in original]
    files = schedule_scouts(args.cache)
    ap = {name: {half: [] for half in cuts} for name in VARIANTS}
    for path in files:
        gold, tags, _ = cached_outputs(path, original)
        for name, score in VARIANTS.items():
            quality = np.array([score(gold[i], spans[i], tags[i]) for i in range(len(original))])
            for half, cut in cuts.items():
                ap[name][half].append(harness.ranking(quality[cut], flags[cut])["ap"])
    words = next(iter(VARIANTS))
    rows, summary = [], {}
    for name in VARIANTS:
        cells = [name]
        summary[name] = {}
        for half in cuts:
            diff = np.array(ap[name][half]) - np.array(ap[words][half])
            stats = {
                "ap": harness.mean_sd(ap[name][half]),
                "diff": harness.mean_sd(diff),
                "higher": int((diff > 0).sum()),
            }
            summary[name][half] = stats
            cells.append(harness.pm(stats["ap"]))
            cells.append(
                "" if name == words else f"{stats['diff']['mean']:+.3f} ({stats['higher']})"
            )
        rows.append(cells)
    header = ["score (parts, temperature)"]
    for half in cuts:
        header += [f"{half} AP", f"{half}: vs words (scouts higher)"]
    lines = [
        "## Entity-level scores on real errors: CoNLL-2003 test against CoNLL++",
        "",
        f"{halves_base_rate(flags)} AP mean ± sd over {len(files)} cached scouts "
        f"({', '.join(p.stem.removeprefix('scout-all-') for p in files)}); *vs words*: the mean "
        "paired difference from the soft minimum over the words on the same scouts, and how "
        f"many of the {len(files)} scouts rank higher.",
        "",
        *harness.table(header, rows),
        "",
    ]
    return finish(
        "entity_parts",
        NAME,
        argv,
        args,
        lines,
        scouts=[p.name for p in files],
        summary=summary,
        values=ap,
    )


if __name__ == "__main__":
    raise SystemExit(main())
