"""What the scouts learned of their training annotations (subregweigh.learned)."""

import json

import numpy as np
import pytest

from subregweigh.learned import LEARNED_TOO_LITTLE, Learned, learned_path

GOLD = [("B-PER", "I-PER", "O", "B-LOC"), ("O", "B-PER", "O", "O"), ("B-ORG", "O", "O", "O")]


def test_entities_found_again_are_counted_per_type_weakest_first():
    predicted = [("B-PER", "I-PER", "O", "O"), ("O", "O", "O", "O"), ("B-ORG", "O", "O", "O")]
    learned = Learned.of(GOLD, predicted)
    assert (learned.found, learned.total) == (2, 4)
    assert [(r.label, r.found, r.total) for r in learned.by_label] == [
        ("LOC", 0, 1),
        ("PER", 1, 2),
        ("ORG", 1, 1),
    ]
    assert learned.recall == 0.5 and not learned.too_little  # the threshold is "under"


def test_a_scout_that_finds_too_few_says_so_and_names_the_weakest_types():
    learned = Learned.of(GOLD, [("O",) * 4] * 3)
    assert learned.too_little and LEARNED_TOO_LITTLE > 0
    message = learned.message()
    assert message.startswith("the scout finds 0 of the 4 entities")
    assert "learned too little" in message and "rest on the CRF" in message
    assert "LOC 0 of 1" in message and "<" not in message  # survives Label Studio's display
    assert "too little" not in Learned.of(GOLD, GOLD).message()


def test_no_annotated_entity_is_nothing_to_measure():
    assert Learned.of([("O", "O")], [("B-PER", "O")]) is None


def test_the_prediction_is_each_words_most_probable_tag():
    labels = ["O", "B-PER", "I-PER", "B-LOC", "B-ORG"]
    proba = [np.eye(len(labels))[[labels.index(t) for t in tags]] for tags in GOLD]
    assert Learned.of_proba(GOLD, proba, labels) == Learned.of(GOLD, GOLD)


def test_it_is_kept_as_json_and_read_back(tmp_path):
    learned = Learned.of(GOLD, [("O",) * 4] * 3)
    path = learned.save(learned_path(tmp_path))
    assert path.name == "learned.json"
    assert json.loads(path.read_text())["too_little"] is True
    assert Learned.load(path) == learned
    path.write_text('{"found": 5, "total": 4, "by_label": []}')
    with pytest.raises(ValueError, match="learned.json: not a Learned: found 5 of 4"):
        Learned.load(path)
    path.write_text("[1]")
    with pytest.raises(ValueError, match="learned.json: not a Learned"):
        Learned.load(path)
