from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from subregweigh.example import DataError, Example
from subregweigh.tags import (
    detect_scheme,
    entity_spans,
    entity_types,
    iob1_to_iob2,
    spans_to_tags,
    validate_iob2,
)
from tests.paths import DATA


def test_iob1_to_iob2_basic():
    assert iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC"]) == ["B-PER", "I-PER", "O", "B-LOC"]
    # B- in IOB1 separates adjacent same-type entities and is kept
    assert iob1_to_iob2(["I-PER", "B-PER", "I-PER"]) == ["B-PER", "B-PER", "I-PER"]
    # type change without O
    assert iob1_to_iob2(["I-ORG", "I-LOC", "I-LOC"]) == ["B-ORG", "B-LOC", "I-LOC"]
    assert iob1_to_iob2([]) == []


def test_detect_scheme():
    assert detect_scheme([["B-PER", "I-PER", "O"], ["O"]]) == "IOB2"
    assert detect_scheme([["B-PER", "I-PER"], ["O", "I-LOC"]]) == "IOB1"
    assert detect_scheme([["I-PER"]]) == "IOB1"
    assert detect_scheme([["B-PER", "I-LOC"]]) == "IOB1"
    assert detect_scheme([["O", "O"]]) == "IOB2"


def test_validate_iob2():
    validate_iob2(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"], "x")
    with pytest.raises(DataError, match=r"^f\.jsonl:3: word 2: .*I-LOC"):
        validate_iob2(["B-PER", "I-PER", "I-LOC"], "f.jsonl:3")
    with pytest.raises(DataError, match=r"ex7: word 0:"):
        validate_iob2(["I-PER"], "ex7")
    with pytest.raises(DataError, match=r"word 1: unknown tag 'PER'"):
        validate_iob2(["O", "PER"], "ex")
    for bad in ["B-", "E-PER", "S-LOC", "o", ""]:
        with pytest.raises(DataError):
            validate_iob2([bad], "ex")


def test_entity_spans_and_back():
    tags = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-MISC"]
    spans = entity_spans(tags)
    assert spans == [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 6), ("MISC", 6, 7)]
    assert spans_to_tags(spans, len(tags)) == tags
    assert entity_spans(["O", "O"]) == []
    with pytest.raises(ValueError):
        spans_to_tags([("PER", 0, 2), ("LOC", 1, 3)], 4)
    with pytest.raises(ValueError):
        spans_to_tags([("PER", 2, 5)], 4)


tag_st = st.sampled_from(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])


@given(st.lists(tag_st, max_size=12))
def test_conversion_gives_valid_iob2_and_roundtrips(tags):
    converted = iob1_to_iob2(tags)
    validate_iob2(converted, "h")
    assert spans_to_tags(entity_spans(converted), len(converted)) == converted
    # already-IOB2 input is unchanged
    assert iob1_to_iob2(converted) == converted


def test_entity_types():
    exs = [Example("0", ("a", "b"), ("B-PER", "O")), Example("1", ("c",), ("B-LOC",))]
    assert entity_types(exs) == ["LOC", "PER"]


def _raw_ner_columns(path: Path) -> list[list[str]]:
    """Last-column tags per sentence, read independently of subregweigh.io."""
    sents, cur = [], []
    for line in path.read_text().split("\n"):
        cols = line.split()
        if not cols or cols[0] == "-DOCSTART-":
            if cur:
                sents.append(cur)
                cur = []
            continue
        cur.append(cols[-1])
    if cur:
        sents.append(cur)
    return sents


def test_iob1_conversion_on_real_conll_matches_conllpp():
    orig = _raw_ner_columns(DATA / "conll2003" / "eng.train")
    pp = _raw_ner_columns(DATA / "conllpp" / "conllpp_train.txt")
    assert detect_scheme(orig) == "IOB1"
    assert detect_scheme(pp) == "IOB2"
    assert len(orig) == len(pp) == 14041
    converted = [iob1_to_iob2(t) for t in orig]
    assert converted == pp
    assert sum(len(entity_spans(t)) for t in converted) == 23499
