"""Real annotators' errors on tweets: the Broad Twitter Corpus, section B (Derczynski et al.,
COLING 2016; ``../shared/data/btc``), one crowd worker's labels against the experts'.

For each tweet and each type (person, location, organisation) two workers clicked the tokens
of that type's names (``b.crowd-raw/b.{per,loc,org}.partial.json``). **The annotation** is one
judgment slot's worker for every type: consecutive clicked tokens of a type form one entity (a
token clicked for two types keeps the first of PER, LOC, ORG). **The truth** is the experts'
IOB2 tags (``b.conll``). **The tweets** are those whose three types were all judged, joined to
the experts' by their tokens: 788. A tweet is **erroneous** where the worker's tags differ from
the experts': with slot 0, 169 (21.4%); with slot 1, 126 (16.0%); 320 of the 788 hold an entity
in the experts' labels. Missed entities, wrong types and boundaries, on short, sparse text: what
a Label Studio project of a few hundred tweets looks like, unlike CoNLL.

    original, corrected, flags = load_pair(slot=0)   # the worker's, the experts', which differ

``python -m benchmarks.tweets`` prints the counts above.
"""

from __future__ import annotations

import json
from functools import cache

import numpy as np

from benchmarks.harness import DATA
from subregweigh.compare import differs
from subregweigh.example import Example
from subregweigh.io import read_conll

BTC = DATA / "btc"
TYPES = ("PER", "LOC", "ORG")  # the order a token clicked for two types is resolved in
FILES = {"PER": "b.per.partial.json", "LOC": "b.loc.partial.json", "ORG": "b.org.partial.json"}
CLICKED = "click_to_mark_the_words_that_are_part_of_"
SLOTS = (0, 1)


def _clicks(judgment: dict) -> set[int]:
    """The token indices a judgment clicked (none: ``names_found`` is "none")."""
    for key, value in (judgment.get("data") or {}).items():
        if key.startswith(CLICKED) and isinstance(value, list):
            return {int(i) for i in value}
    return set()


@cache
def _judged() -> dict[tuple[str, ...], dict[str, list[set[int]]]]:
    """tokens -> type -> the clicks of each judgment slot, for every tweet a type was judged
    twice."""
    out: dict[tuple[str, ...], dict[str, list[set[int]]]] = {}
    for etype, name in FILES.items():
        for line in (BTC / "b.crowd-raw" / name).read_text(encoding="utf-8").splitlines():
            judgments = json.loads(line)["results"]["judgments"]
            if len(judgments) < len(SLOTS):
                continue
            tokens = tuple(judgments[0]["unit_data"]["tokens"])
            out.setdefault(tokens, {})[etype] = [_clicks(j) for j in judgments[: len(SLOTS)]]
    return out


def worker_tags(n_words: int, clicks: dict[str, set[int]]) -> tuple[str, ...]:
    """IOB2 tags from one worker's clicks per type: a run of consecutive clicked tokens of a
    type is one entity; a token clicked for two types keeps the first of :data:`TYPES`."""
    types = [next((t for t in TYPES if i in clicks[t]), None) for i in range(n_words)]
    return tuple(
        "O" if t is None else ("I-" if i and types[i - 1] == t else "B-") + t
        for i, t in enumerate(types)
    )


def load_pair(slot: int = 0) -> tuple[list[Example], list[Example], np.ndarray]:
    """``(annotated, corrected, flags)``: the 788 tweets with every type judged, as judgment
    ``slot``'s worker annotated them and as the experts did, in ``b.conll``'s order, and which
    differ (bool, shape (n,))."""
    if slot not in SLOTS:
        raise ValueError(f"slot must be one of {SLOTS}, got {slot!r}")
    judged = _judged()
    annotated, corrected = [], []
    for expert in read_conll(BTC / "b.conll"):
        types = judged.get(tuple(expert.words))
        if types is None or set(types) != set(TYPES):
            continue
        tags = worker_tags(len(expert.words), {t: types[t][slot] for t in TYPES})
        annotated.append(Example(expert.id, expert.words, tags, expert.source))
        corrected.append(expert)
    return annotated, corrected, differs(annotated, corrected)


def main(argv=None) -> int:
    """Print each slot's counts (no arguments)."""
    for slot in SLOTS:
        annotated, corrected, flags = load_pair(slot)
        with_entity = sum(any(t != "O" for t in ex.label) for ex in corrected)
        print(
            f"slot {slot}: {len(annotated)} tweets, {int(flags.sum())} erroneous "
            f"({flags.mean():.1%}), {with_entity} with an entity in the experts' labels"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
