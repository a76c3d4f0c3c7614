"""Which real errors the served score misses, and why a scout trained on the project cannot see
them.

What it measures: for the scouts that ``benchmarks.exploration.scout_schedule`` cached (the
default schedule, 3 seeds, trained on CoNLL-2003 test as annotated), the errors against CoNLL++
that the served score until 2026-11-27 (the soft minimum over the words) leaves below twice as
many sentences as there are errors (x2, where the review-loop target is read): their kinds of change
(``subregweigh.compare``), the share in all-caps sentences (headlines, sports tables), and the
share that repeat their slip (a (word, type) pair the fix changed,
``benchmarks.word_slips.slip_keys``) in another erroneous sentence, against the errors it finds.
It trains nothing::

    python -m benchmarks.exploration.scout_schedule --cache /tmp/review-loop 3
    python -m benchmarks.exploration.missed_errors --cache /tmp/review-loop
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from benchmarks import harness
from benchmarks.exploration import cache_parser, finish
from benchmarks.real_errors import load_pair
from benchmarks.review_loop import cache_file, cached_outputs, whole_set_settings
from benchmarks.word_slips import slip_keys
from subregweigh.compare import CHANGE_KINDS, span_changes
from subregweigh.options import SOFTMIN_TEMPERATURE
from subregweigh.scores import soft_minimum

NAME = "missed-errors"


def all_caps(words) -> bool:
    """Most of a sentence's alphabetic words are upper case (a headline, a table row)."""
    alpha = [w for w in words if any(c.isalpha() for c in w)]
    return bool(alpha) and np.mean([w.isupper() for w in alpha]) > 0.8


def main(argv=None) -> int:
    args = cache_parser(__doc__).parse_args(argv)
    original, corrected, flags = load_pair()
    errors = np.flatnonzero(flags)
    budget = 2 * len(errors)
    keys = {i: slip_keys(original[i], corrected[i]) for i in errors}
    repeated = {i: any(keys[i] & keys[j] for j in errors if j != i) for i in errors}
    kinds = {
        i: {c.kind for c in span_changes(original[i].label, corrected[i].label)} for i in errors
    }
    caps = {i: all_caps(original[i].words) for i in errors}
    rows = {"found": [], "missed": []}
    strings: Counter = Counter()
    for seed in range(args.seeds):
        gold, _, _ = cached_outputs(cache_file(whole_set_settings(args.cache, 3), seed), original)
        quality = np.array([soft_minimum(g, SOFTMIN_TEMPERATURE) for g in gold])
        top = set(np.argsort(quality, kind="stable")[:budget].tolist())
        for name, group in (
            ("found", [i for i in errors if i in top]),
            ("missed", [i for i in errors if i not in top]),
        ):
            row = {"n": len(group), "all caps": np.mean([caps[i] for i in group])}
            row["repeated slip"] = np.mean([repeated[i] for i in group])
            for kind in CHANGE_KINDS:
                row[kind] = np.mean([kind in kinds[i] for i in group])
            rows[name].append({k: float(v) for k, v in row.items()})
            if name == "missed":
                for i in group:
                    for change in span_changes(original[i].label, corrected[i].label):
                        _, start, end = change.corrected or change.original
                        text = " ".join(original[i].words[start:end])
                        strings[f"{change.kind}: {text}"] += 1
    summary = {name: harness.summarize_rows(r, list(r[0])) for name, r in rows.items()}
    columns = ["n", "all caps", "repeated slip", *CHANGE_KINDS]
    lines = [
        "## The real errors the served score misses at x2: CoNLL-2003 test against CoNLL++",
        "",
        f"{len(errors)} erroneous sentences of {len(original)}; "
        f"{np.mean([all_caps(ex.words) for ex in original]):.3f} of all sentences are all caps. "
        f"Per seed ({args.seeds}), the errors among the {budget} most doubtful sentences "
        f"(found) and the rest (missed), by the served score (the soft minimum at "
        f"{SOFTMIN_TEMPERATURE}); shares of each group, mean ± sd over seeds. *Repeated slip*: "
        "another erroneous sentence shares a (word, type) pair the fix changed. A sentence can "
        "hold changes of several kinds.",
        "",
        *harness.table(
            ["errors", *columns],
            [
                [name] + [harness.pm(summary[name][c], 0 if c == "n" else 3) for c in columns]
                for name in summary
            ],
        ),
        "",
        "Changes most often missed (summed over the seeds; the corrected span's words, or the "
        "original's where the correction removed it):",
        "",
        *[f"- {text} ({count})" for text, count in strings.most_common(15)],
        "",
    ]
    return finish(
        "missed_errors",
        NAME,
        argv,
        args,
        lines,
        summary=summary,
        values=rows,
        most_missed=strings.most_common(30),
    )


if __name__ == "__main__":
    raise SystemExit(main())
