"""Label Studio character spans <-> word-level IOB2 tags (subregweigh.spans), and the result
shapes the backend writes (backend.labelstudio.convert)."""

from __future__ import annotations

import pytest

from backend.labelstudio.convert import choices_result, labels_result
from subregweigh.spans import spans_to_tags, words_with_offsets
from subregweigh.tags import entity_spans
from tests.paths import DATA

CONLLPP_TRAIN = DATA / "conllpp" / "conllpp_train.txt"


# ----------------------------------------------------------------------------- words_with_offsets


def _check_offsets(text, words):
    for word, start, end in words:
        assert text[start:end] == word
    starts = [s for _, s, _ in words]
    assert starts == sorted(starts)
    # Every non-space character belongs to exactly one word.
    covered = sorted(i for _, s, e in words for i in range(s, e))
    assert covered == [i for i, ch in enumerate(text) if not ch.isspace()]


def test_words_unicode_letters():
    text = "Zürich liegt nicht in 東京, oder?"
    words = words_with_offsets(text)
    assert [w for w, _, _ in words] == ["Zürich", "liegt", "nicht", "in", "東京", ",", "oder", "?"]
    _check_offsets(text, words)
    assert words[0] == ("Zürich", 0, 6)


def test_words_punctuation_split_off():
    text = '"Hello," she said (quietly)... U.S.-based'
    words = [w for w, _, _ in words_with_offsets(text)]
    assert words == [
        '"',
        "Hello",
        ",",
        '"',
        "she",
        "said",
        "(",
        "quietly",
        ")",
        ".",
        ".",
        ".",
        "U",
        ".",
        "S",
        ".",
        "-",
        "based",
    ]
    _check_offsets(text, words_with_offsets(text))


def test_words_emoji_and_combining_marks():
    text = "I ❤️ Köln 🎉🎉 café\u0301 ok"  # emoji with variation selector; decomposed accent
    words = words_with_offsets(text)
    _check_offsets(text, words)
    strings = [w for w, _, _ in words]
    assert "Köln" in strings and "ok" in strings
    assert strings.count("🎉") == 2  # each emoji is its own word


@pytest.mark.parametrize("word", ["Zu\u0308rich", "हिन्दी"])
def test_words_combining_marks_stay_in_the_word(word):
    assert [w for w, _, _ in words_with_offsets(word)] == [word]


def test_words_combining_marks_still_slice_back():
    for text in ["Zu\u0308rich liegt", "हिन्दी भाषा"]:
        _check_offsets(text, words_with_offsets(text))


def test_words_whitespace_variants_and_empty():
    assert words_with_offsets("") == []
    assert words_with_offsets(" \t\n\u00a0 ") == []
    text = "a\tb\nc\u00a0d  e"
    words = words_with_offsets(text)
    assert [w for w, _, _ in words] == ["a", "b", "c", "d", "e"]
    _check_offsets(text, words)


def test_words_digits_and_underscores():
    text = "1996-08-22 snake_case 3.14"
    words = words_with_offsets(text)
    assert [w for w, _, _ in words] == ["1996", "-", "08", "-", "22", "snake_case", "3", ".", "14"]
    _check_offsets(text, words)


# ----------------------------------------------------------------------------- spans_to_tags


def _tags(text, spans, where="task 7"):
    words, tags, warnings = spans_to_tags(text, spans, where)
    return [w for w, _, _ in words], tags, warnings


def test_spans_to_tags_basic():
    text = "Angela Merkel visited Zürich and 東京."
    words, tags, warnings = _tags(text, [(0, 13, "PER"), (22, 28, "LOC"), (33, 35, "LOC")])
    assert words == ["Angela", "Merkel", "visited", "Zürich", "and", "東京", "."]
    assert tags == ["B-PER", "I-PER", "O", "B-LOC", "O", "B-LOC", "O"]
    assert warnings == []


def test_spans_to_tags_unsorted_input_and_adjacent_same_type():
    text = "Peter Paul Mary"
    _, tags, warnings = _tags(text, [(11, 15, "PER"), (0, 5, "PER"), (6, 10, "PER")])
    assert tags == ["B-PER", "B-PER", "B-PER"]
    assert warnings == []
    assert entity_spans(tags) == [("PER", 0, 1), ("PER", 1, 2), ("PER", 2, 3)]


def test_spans_to_tags_span_with_trailing_space_is_not_a_cut():
    text = "in New York ."
    _, tags, warnings = _tags(text, [(2, 12, "LOC")])  # " New York " including both spaces
    assert tags == ["O", "B-LOC", "I-LOC", "O"]
    assert warnings == []


def test_spans_to_tags_no_spans():
    words, tags, warnings = _tags("nothing here", [])
    assert tags == ["O", "O"] and warnings == []


def test_span_cutting_a_word_is_widened_with_warning():
    text = "Visit Zürich today"
    _, tags, warnings = _tags(text, [(7, 10, "LOC")], where="task 42")  # "üri"
    assert tags == ["O", "B-LOC", "O"]
    assert len(warnings) == 1
    assert "task 42" in warnings[0]
    assert "cuts a word" in warnings[0] and "widened to 6-12" in warnings[0]


def test_span_cutting_two_words_is_widened_over_both():
    text = "New York City"
    _, tags, warnings = _tags(text, [(2, 6, "LOC")], where="task 3")  # "w Yo"
    assert tags == ["B-LOC", "I-LOC", "O"]
    assert len(warnings) == 1 and "task 3" in warnings[0] and "widened to 0-8" in warnings[0]


def test_overlapping_spans_later_one_skipped():
    text = "New York City Council"
    # (0, 13) "New York City" first; (9, 21) "City Council" starts later and overlaps: skipped.
    _, tags, warnings = _tags(text, [(9, 21, "ORG"), (0, 13, "LOC")], where="task 5")
    assert tags == ["B-LOC", "I-LOC", "I-LOC", "O"]
    assert len(warnings) == 1
    assert "task 5" in warnings[0] and "9-21" in warnings[0] and "overlaps" in warnings[0]


def test_overlapping_spans_same_start_shorter_one_skipped():
    text = "New York City Council"
    _, tags, warnings = _tags(text, [(0, 8, "LOC"), (0, 21, "ORG")], where="task 6")
    assert tags == ["B-ORG", "I-ORG", "I-ORG", "I-ORG"]
    assert len(warnings) == 1 and "task 6" in warnings[0] and "0-8" in warnings[0]


def test_nested_span_skipped():
    text = "Bank of England said"
    _, tags, warnings = _tags(text, [(0, 15, "ORG"), (8, 15, "LOC")])
    assert tags == ["B-ORG", "I-ORG", "I-ORG", "O"]
    assert len(warnings) == 1 and "overlaps" in warnings[0]


def test_widened_span_overlapping_a_neighbour_is_skipped():
    text = "New York"
    _, tags, warnings = _tags(text, [(0, 5, "LOC"), (5, 8, "ORG")])  # "New Y" and "ork"
    assert tags == ["B-LOC", "I-LOC"]
    assert any("widened" in w for w in warnings)
    assert any("5-8" in w and "overlaps" in w for w in warnings)


@pytest.mark.parametrize("span", [(-1, 3), (0, 99), (5, 5), (6, 2), (20, 25)])
def test_spans_outside_the_text_skipped(span):
    text = "short text"
    _, tags, warnings = _tags(text, [(span[0], span[1], "X")], where="task 9")
    assert tags == ["O", "O"]
    assert len(warnings) == 1
    assert "task 9" in warnings[0] and "skipped" in warnings[0]


def test_span_outside_does_not_stop_the_others():
    text = "Paris is nice"
    _, tags, warnings = _tags(text, [(0, 5, "LOC"), (50, 60, "LOC")], where="task 1")
    assert tags == ["B-LOC", "O", "O"]
    assert len(warnings) == 1 and "outside the text" in warnings[0]


def test_span_covering_only_whitespace_skipped():
    text = "a    b"
    _, tags, warnings = _tags(text, [(1, 5, "X")], where="task 11")
    assert tags == ["O", "O"]
    assert len(warnings) == 1
    assert "task 11" in warnings[0] and "covers no word" in warnings[0]


# ----------------------------------------------------------------------------- CoNLL round trip


def _conll_round_trip(example):
    tokens = list(example.words)
    text = " ".join(tokens)
    token_offsets, pos = [], 0
    for tok in tokens:
        token_offsets.append((pos, pos + len(tok)))
        pos += len(tok) + 1
    char_spans = [
        (token_offsets[s][0], token_offsets[e - 1][1], t) for t, s, e in entity_spans(example.label)
    ]

    words, tags, warnings = spans_to_tags(text, char_spans, f"sentence {example.id}")
    assert warnings == [], (example.id, warnings)

    # Expected tags on the regex words, derived independently from the CoNLL tokens: every
    # regex word lies inside exactly one token; it is B- if it is the first word of the
    # entity's first token, I- for the other words of the entity, O outside entities.
    token_of = []
    for _, ws, we in words:
        (idx,) = [i for i, (ts, te) in enumerate(token_offsets) if ts <= ws and we <= te]
        token_of.append(idx)
    expected, seen_first = [], set()
    for j, idx in enumerate(token_of):
        tag = example.label[idx]
        if tag == "O":
            expected.append("O")
        elif tag.startswith("B-") and idx not in seen_first:
            expected.append(tag)
            seen_first.add(idx)
        else:
            expected.append("I-" + tag[2:])
    assert tags == expected, example.id

    back = [(words[s][1], words[e - 1][2], t) for t, s, e in entity_spans(tags)]
    assert back == char_spans, example.id
    for start, end, _ in back:  # the character spans cover whole tokens
        assert text[start:end].split(" ")[0] in tokens
    return len(words) != len(tokens)


def test_conll_round_trip_real_sentences():
    from subregweigh.io import read_conll

    examples = read_conll(CONLLPP_TRAIN)[:3000]
    assert any(ex.words == ("BRUSSELS", "1996-08-22") for ex in examples)
    split = sum(_conll_round_trip(ex) for ex in examples)
    assert split > 100  # many sentences have tokens the regex splits ("1996-08-22", "U.S.")


def test_conll_round_trip_entities_with_split_tokens():
    from subregweigh.example import Example

    ex = Example(
        id="x",
        words=("U.S.-based", "Procter", "&", "Gamble", "Co.", "said", "1996-08-22"),
        label=("B-MISC", "B-ORG", "I-ORG", "I-ORG", "I-ORG", "O", "O"),
    )
    assert _conll_round_trip(ex)


# ----------------------------------------------------------------------------- results


def test_labels_result_shape_with_scores():
    text = "Angela Merkel visited Zürich"
    result = labels_result(text, [(0, 13, "PER"), (22, 28, "LOC")], "label", "text", [0.9, 0.4])
    assert result == [
        {
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": 0, "end": 13, "text": "Angela Merkel", "labels": ["PER"]},
            "score": 0.9,
        },
        {
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": 22, "end": 28, "text": "Zürich", "labels": ["LOC"]},
            "score": 0.4,
        },
    ]
    assert all(type(r["score"]) is float for r in result)


def test_labels_result_without_scores_and_empty():
    result = labels_result("東京 is big", [(0, 2, "LOC")], "ner", "doc")
    assert result == [
        {
            "from_name": "ner",
            "to_name": "doc",
            "type": "labels",
            "value": {"start": 0, "end": 2, "text": "東京", "labels": ["LOC"]},
        }
    ]
    assert labels_result("text", [], "ner", "doc", []) == []


def test_labels_result_numpy_scores_become_json_floats():
    import json

    import numpy as np

    result = labels_result("ab cd", [(0, 2, "X")], "l", "t", np.array([0.5], dtype=np.float32))
    assert type(result[0]["score"]) is float
    json.dumps(result)


def test_choices_result_shape():
    assert choices_result(["neg", "pos"], "sentiment", "text") == [
        {
            "from_name": "sentiment",
            "to_name": "text",
            "type": "choices",
            "value": {"choices": ["neg", "pos"]},
        }
    ]
    assert choices_result(("pos",), "s", "t")[0]["value"]["choices"] == ["pos"]
    assert choices_result([], "s", "t") == []
    assert choices_result((), "s", "t") == []
