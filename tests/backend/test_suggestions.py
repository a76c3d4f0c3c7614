"""Suggestions with confidence (issue 29, item 3): what the scout would say instead of an
annotation, from its own outputs (subregweigh.suggest), and how a prediction carries it
(backend.labelstudio.convert, backend.labelstudio.tasks): a classification result's score and meta
note, NER regions' notes with the scout's suggested span. Real scouts (MiniLM): the session's tiny
NER scout, a sentiment scout on SST-2 and a multi-label one trained here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.labelstudio.convert import RESTING_NOTE, class_note, doubt_regions
from backend.labelstudio.tasks import parse_label_config, read_tasks, score_tasks
from subregweigh.compare import span_changes
from subregweigh.scores import collect, soft_minimum
from subregweigh.suggest import class_suggestion, span_suggestions
from subregweigh.weigh import SubRegWeigh
from tests.engine.test_scout_integration import multi_label_scout

CLS_CONFIG = """<View><Text name="text" value="$text"/>
  <Choices name="sentiment" toName="text" choice="single">
    <Choice value="0"/><Choice value="1"/></Choices></View>"""
MULTI_CONFIG = CLS_CONFIG.replace('"single"', '"multiple"').replace(
    '<Choice value="0"/><Choice value="1"/>',
    '<Choice value="neg"/><Choice value="pos"/><Choice value="sports"/>',
)
NER_CONFIG = """<View><Labels name="label" toName="text">
  <Label value="PER"/><Label value="LOC"/><Label value="ORG"/><Label value="MISC"/></Labels>
  <Text name="text" value="$text"/></View>"""


def sentiment_scout(sst2_train):
    """A sentiment scout on 40 SST-2 rows (frozen encoder, 10 epochs: about 10 s on a core),
    and those rows."""
    from subregweigh.scout import Scout

    rows = [ex for ex in sst2_train if 6 <= len(ex.words) <= 30][:40]
    scout = Scout(
        task="classification",
        freeze_encoder=True,
        epochs=10,
        learning_rate=3e-3,
        progress=False,
    ).fit(rows)
    return scout, rows


@pytest.fixture(scope="module")
def sentiment(sst2_train):
    return sentiment_scout(sst2_train)


@pytest.fixture(scope="module")
def multi_label():
    return multi_label_scout()


def ls_task(task_id, text, choices=None, regions=()):
    """A Label Studio task with one annotation (choices, or NER regions as (start, end, label))."""
    if choices is not None:
        result = [
            {
                "from_name": "sentiment",
                "to_name": "text",
                "type": "choices",
                "value": {"choices": list(choices)},
            }
        ]
    else:
        result = [
            {
                "from_name": "label",
                "to_name": "text",
                "type": "labels",
                "value": {"start": s, "end": e, "text": text[s:e], "labels": [label]},
            }
            for s, e, label in regions
        ]
    return {
        "id": task_id,
        "data": {"text": text},
        "annotations": [{"id": task_id, "result": result}],
    }


# ----------------------------------------------------------------------------- the pure parts


def test_class_suggestion_single_label_annotated_suggested_and_next():
    labels = ["sports", "politics", "tech", "arts"]
    s = class_suggestion([0.12, 0.71, 0.10, 0.07], labels, ("sports",))
    assert s.annotated == (("sports", pytest.approx(0.12)),)
    assert s.suggested == (("politics", pytest.approx(0.71)),)
    assert [c for c, _ in s.alternatives] == ["tech", "arts"]  # neither annotated nor suggested
    assert s.probability == pytest.approx(0.71) and not s.agrees
    assert class_note(s) == (
        "annotated sports (p 0.12); the scout suggests politics (p 0.71); "
        "next: tech (p 0.10), arts (p 0.07)"
    )
    agreeing = class_suggestion([0.9, 0.05, 0.03, 0.02], labels, ("sports",), n_alternatives=1)
    assert agreeing.agrees and agreeing.alternatives == (("politics", pytest.approx(0.05)),)
    assert (
        class_note(agreeing)
        == "annotated sports (p 0.90), as the scout suggests; next: politics (p 0.05)"
    )
    # a label the scout never saw: probability 0, and the suggestion still stands
    unknown = class_suggestion([0.2, 0.8], ["a", "b"], ("c",))
    assert unknown.annotated == (("c", 0.0),) and unknown.suggested[0][0] == "b"
    with pytest.raises(ValueError, match=r"shape \(3,\); expected \(2,\)"):
        class_suggestion([0.2, 0.3, 0.5], ["a", "b"], ("a",))


def test_class_suggestion_multi_label_per_label():
    labels = ["sports", "politics", "tech", "arts"]
    s = class_suggestion([0.93, 0.81, 0.20, 0.03], labels, ("tech", "sports"), multi_label=True)
    assert s.annotated == (("sports", pytest.approx(0.93)), ("tech", pytest.approx(0.20)))
    assert s.suggested == (("sports", pytest.approx(0.93)), ("politics", pytest.approx(0.81)))
    assert s.alternatives == (("arts", pytest.approx(0.03)),)
    # its confidence in the whole suggestion: the least sure decision (tech: not, 0.80)
    assert s.probability == pytest.approx(0.80)
    assert class_note(s) == (
        "annotated sports (p 0.93), tech (p 0.20); the scout suggests sports (p 0.93), "
        "politics (p 0.81); next: arts (p 0.03)"
    )
    none = class_suggestion([0.4, 0.1, 0.2, 0.3], labels, ("arts",), multi_label=True)
    assert none.suggested == () and "the scout suggests no label" in class_note(none)


def test_span_suggestions_name_every_kind_with_both_confidences():
    annotated = ("B-ORG", "O", "B-PER", "I-PER", "O", "B-LOC", "O", "O")
    scout = ("B-LOC", "O", "B-PER", "O", "O", "O", "O", "B-MISC")
    of_annotated = [("ORG", 0, 1, 0.1), ("PER", 2, 4, 0.4), ("LOC", 5, 6, 0.2)]
    of_scout = [("LOC", 0, 1, 0.9), ("PER", 2, 3, 0.8), ("MISC", 7, 8, 0.6)]
    got = span_suggestions(annotated, scout, of_annotated, of_scout)
    assert [(s.kind, s.annotated, s.suggested) for s in got] == [
        ("type", ("ORG", 0, 1, 0.1), ("LOC", 0, 1, 0.9)),
        ("boundary", ("PER", 2, 4, 0.4), ("PER", 2, 3, 0.8)),
        ("spurious", ("LOC", 5, 6, 0.2), None),
        ("missing", None, ("MISC", 7, 8, 0.6)),
    ]
    assert span_suggestions(annotated, annotated) == []
    (unscored,) = span_suggestions(("O",), ("B-PER",))
    assert math.isnan(unscored.suggested[3])

    words = "Acme met John Smith in Paris on Monday".split()
    regions, notes = doubt_regions(
        of_scout, got, lambda s, e: " ".join(words[s:e]), per="probability"
    )
    assert [r[:3] for r in regions] == [("LOC", 0, 1), ("PER", 2, 3), ("LOC", 5, 6), ("MISC", 7, 8)]
    assert regions[2][3] == 0.2  # the annotated entity the scout drops, at its p
    assert notes == [
        "annotated as ORG (p 0.10); the scout says LOC (p 0.90)",
        'annotated as PER over "John Smith" (p 0.40); the scout says PER (p 0.80)',
        "annotated as LOC (p 0.20); the scout finds no entity",
        'not annotated: the scout finds "Monday" as MISC (p 0.60)',
    ]
    _, copies = doubt_regions(of_scout, got[:1], str, per="copies")
    assert copies[0] == "annotated as ORG (p 0.10); the scout says LOC on 90% of the copies"
    assert copies[1:] == [None, None]  # where the scout and the annotation agree: no note
    # a version resting on the CRF (its scout learned too little) names the CRF, and says why
    _, resting = doubt_regions(
        of_scout, got, lambda s, e: " ".join(words[s:e]), per="probability", resting=True
    )
    assert resting[3] == (
        'not annotated: the CRF finds "Monday" as MISC (p 0.60); the scout learned too little '
        "of this project, so the CRF and the other annotations judge"
    )
    assert resting[2].startswith("annotated as LOC (p 0.20); the CRF finds no entity; ")
    assert all(note.endswith(RESTING_NOTE) and "<" not in note for note in resting)


# ----------------------------------------------------------------------------- real scouts


@pytest.mark.slow
def test_class_probability_comes_from_the_scoring_pass(sentiment):
    scout, rows = sentiment
    srw = SubRegWeigh.from_parts([scout], k=3, n_samples=10, progress=False)
    ordinary = srw.weigh_deterministic(rows)
    proba = ordinary.class_probability
    assert ordinary.labels == scout.labels_ == ["0", "1"] and proba.shape == (len(rows), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(proba, np.stack(scout.predict_proba(rows)), rtol=1e-4, atol=1e-6)
    # the score is p(annotated label) of that very row; the suggestion is the scout's prediction
    disagree = 0
    for i, ex in enumerate(rows):
        s = class_suggestion(proba[i], ordinary.labels, ex.label)
        assert s.annotated[0][1] == pytest.approx(ordinary.deterministic_probability[i], abs=1e-6)
        assert tuple(c for c, _ in s.suggested) == ordinary.majority[i]
        assert s.alternatives == tuple(
            (c, p)
            for c, p in zip(ordinary.labels, proba[i])
            if (c,) != ordinary.majority[i] and (c,) != ex.label
        )
        disagree += not s.agrees
    assert 0 < disagree < len(rows)  # the check has both kinds to tell apart
    # weigh() computes the same deterministic pass, probabilities included (on the same rows:
    # other rows in a batch change its padding, and bfloat16 passes then differ in the 4th digit)
    full = srw.weigh(rows[:5])
    same = srw.weigh_deterministic(rows[:5]).class_probability
    np.testing.assert_allclose(full.class_probability, same, rtol=1e-5)
    no_ordinary = SubRegWeigh.from_parts(
        [scout], k=3, n_samples=10, progress=False, deterministic=False
    ).weigh(rows[:5])
    assert no_ordinary.class_probability.shape == (0, 0) and no_ordinary.labels == []


@pytest.mark.slow
def test_multi_label_suggestion_per_label_from_a_real_scout(multi_label):
    scout, train = multi_label
    srw = SubRegWeigh.from_parts([scout], k=3, n_samples=10, progress=False)
    ordinary = srw.weigh_deterministic(train)
    sigmoids = np.stack(scout.predict_proba(train))
    np.testing.assert_allclose(ordinary.class_probability, sigmoids, rtol=1e-4, atol=1e-6)
    for i, ex in enumerate(train):
        s = class_suggestion(ordinary.class_probability[i], ordinary.labels, ex.label, True)
        assert tuple(sorted(c for c, _ in s.suggested)) == ordinary.majority[i]
        # its confidence is the least sure decision; the score, the soft minimum of the annotated
        # memberships' probabilities
        decisions = np.maximum(sigmoids[i], 1 - sigmoids[i])
        assert s.probability == pytest.approx(decisions.min(), abs=1e-5)
        member = np.isin(ordinary.labels, ex.label)
        of_annotation = soft_minimum(np.where(member, sigmoids[i], 1 - sigmoids[i]))
        assert ordinary.deterministic_probability[i] == pytest.approx(of_annotation, abs=1e-5)
        assert dict(s.annotated) == pytest.approx(
            {c: sigmoids[i][ordinary.labels.index(c)] for c in ex.label}, abs=1e-5
        )


def test_span_suggestions_on_the_tiny_scouts_tagging(tiny_scout, tiny_ner_data):
    srw = SubRegWeigh.from_parts([tiny_scout], k=3, n_samples=10, progress=False)
    ordinary = srw.weigh_deterministic(tiny_ner_data)
    seen = 0
    for i, ex in enumerate(tiny_ner_data):
        got = span_suggestions(
            ex.label,
            ordinary.majority[i],
            ordinary.entity_probability[i],
            ordinary.majority_entities[i],
        )
        assert [s.kind for s in got] == [
            c.kind for c in span_changes(ex.label, ordinary.majority[i])
        ]
        of_annotated = {e[:3]: e[3] for e in ordinary.entity_probability[i]}
        of_scout = {e[:3]: e[3] for e in ordinary.majority_entities[i]}
        for s in got:
            if s.annotated:
                assert s.annotated[3] == of_annotated[s.annotated[:3]]
            if s.suggested:
                assert s.suggested[3] == of_scout[s.suggested[:3]]
        seen += len(got)
        # annotated as the scout tags it: nothing to suggest
        assert span_suggestions(ordinary.majority[i], ordinary.majority[i]) == []
    assert seen > 0


# ----------------------------------------------------------------------------- predictions


@pytest.mark.slow
def test_classification_prediction_carries_suggestion_and_confidences(sentiment):
    scout, rows = sentiment
    spec = parse_label_config(CLS_CONFIG)
    tasks = [ls_task(i + 1, ex.text, choices=ex.label) for i, ex in enumerate(rows[:12])]
    tasks.append({"id": 99, "data": {"text": rows[20].text}})  # unannotated: a pre-annotation
    items = [i for i in read_tasks(tasks, spec).tasks if i]
    srw = SubRegWeigh.from_parts([scout], k=3, n_samples=10, progress=False)
    scores = score_tasks(srw, spec, items)
    proba = np.stack(scout.predict_proba(rows[:12]))
    for i, ex in enumerate(rows[:12]):
        entry = scores[str(i + 1)]
        (result,) = entry["result"]
        (suggested,) = result["value"]["choices"]
        gold = scout.labels_.index(ex.label[0])
        assert suggested == scout.labels_[int(proba[i].argmax())]
        assert result["score"] == pytest.approx(proba[i].max(), abs=1e-5)
        (note,) = result["meta"]["text"]
        assert note.startswith(f"annotated {ex.label[0]} (p {proba[i][gold]:.2f})")
        assert entry["score"] == pytest.approx(proba[i][gold], abs=1e-5)  # the task's score
        if suggested == ex.label[0]:
            assert "as the scout suggests" in note
        else:
            assert f"the scout suggests {suggested} (p {proba[i].max():.2f})" in note
    assert "meta" not in scores["99"]["result"][0]  # no annotation to compare with


@pytest.mark.slow
def test_multi_label_prediction_notes_every_label(multi_label):
    scout, train = multi_label
    spec = parse_label_config(MULTI_CONFIG)
    wrong = ls_task(1, " ".join(train[0].words), choices=["neg"])  # is pos and sports
    items = [i for i in read_tasks([wrong], spec).tasks if i]
    srw = SubRegWeigh.from_parts([scout], k=3, n_samples=10, progress=False)
    (result,) = score_tasks(srw, spec, items)["1"]["result"]
    sigmoid = dict(zip(scout.labels_, scout.predict_proba(train[:1])[0]))
    (note,) = result["meta"]["text"]
    assert note.startswith(f"annotated neg (p {sigmoid['neg']:.2f}); the scout suggests ")
    for label in result["value"]["choices"]:
        assert f"{label} (p {sigmoid[label]:.2f})" in note
    assert set(result["value"]["choices"]) == {c for c, p in sigmoid.items() if p > 0.5}


def test_ner_prediction_shows_the_annotated_entity_the_scout_drops(tiny_scout):
    """The 1-epoch scout tags next to nothing: each annotated entity it does not find becomes a
    region of the prediction, at the scout's p of it, with a note saying so."""
    text = "Angela Merkel visited Paris ."
    spec = parse_label_config(NER_CONFIG)
    task = ls_task(5, text, regions=[(0, 13, "PER"), (22, 27, "LOC")])
    (item,) = read_tasks([task], spec).tasks
    srw = SubRegWeigh.from_parts([tiny_scout], k=3, n_samples=10, progress=False)
    regions = score_tasks(srw, spec, [item])["5"]["result"]
    ordinary = srw.weigh_deterministic(item.examples)
    dropped = [
        s.annotated
        for s in span_suggestions(
            item.examples[0].label,
            ordinary.majority[0],
            ordinary.entity_probability[0],
            ordinary.majority_entities[0],
        )
        if s.kind == "spurious"
    ]
    assert dropped, "the tiny scout finds every annotated entity: nothing to check here"
    assert len(regions) == len(ordinary.majority_entities[0]) + len(dropped)
    by_start = {r["value"]["start"]: r for r in regions}
    for etype, start, _, p in dropped:
        region = by_start[item.words[start][1]]
        assert region["value"]["labels"] == [etype] and region["score"] == pytest.approx(p)
        assert region["meta"]["text"] == [
            f"annotated as {etype} (p {p:.2f}); the scout finds no entity"
        ]


def test_ner_prediction_notes_name_the_annotated_words(tiny_scout):
    """How a task's regions read where the scout retypes, moves, adds and drops entities (its
    tagging made up with _collect: the tiny scout finds too little to show every kind)."""
    from backend.labelstudio.tasks import stored_prediction

    text = "Angela Merkel visited Paris with Acme ."
    spec = parse_label_config(NER_CONFIG)
    task = ls_task(6, text, regions=[(0, 13, "PER"), (22, 27, "LOC"), (33, 37, "ORG")])
    (item,) = read_tasks([task], spec).tasks
    (ex,) = item.examples
    scout = ("O", "B-PER", "O", "B-ORG", "O", "O", "O")  # moved, retyped, dropped
    p_gold = np.array([0.3, 0.9, 0.8, 0.2, 0.9, 0.1, 0.9])
    view = collect(
        [ex], [scout], np.zeros(1, int), np.ones(1, int), 1 / 3, "ner", [p_gold], [p_gold]
    )
    view.majority_entities = [[("PER", 1, 2, 0.7), ("ORG", 3, 4, 0.6)]]
    notes = {
        r["value"]["text"]: r.get("meta", {}).get("text", [None])[0]
        for r in stored_prediction(item, spec, view, 0, 1, shown=(view, 0))["result"]
    }
    assert notes == {
        "Merkel": 'annotated as PER over "Angela Merkel" (p 0.30); the scout says PER (p 0.70)',
        "Paris": "annotated as LOC (p 0.20); the scout says ORG (p 0.60)",
        "Acme": "annotated as ORG (p 0.10); the scout finds no entity",
    }


@pytest.mark.slow  # fits a CRF (its context vectors come from MiniLM)
def test_a_notes_two_numbers_come_from_the_models_the_score_comes_from(tiny_scout, tiny_ner_data):
    """Issue 44's bug: "annotated as MISC (p 0.41); the scout says PER (p 0.30)" named a less
    probable label as the scout's, because the annotated entity's p was the score's (scouts
    and CRF mixed) and the scout's entity's p (and tags) its first scout's alone. Both now come
    from the same mixture: each suggested entity's p is its lowest word's mixed p of the
    suggested tag, and a retyped entity is never less probable than the annotated one."""
    from subregweigh.crf import CRF_SHARE, FeatureTagger

    data = tiny_ner_data[:20]
    crf = FeatureTagger().fit(data)
    srw = SubRegWeigh.from_parts([tiny_scout], crf, k=3, n_samples=10, progress=False)
    ordinary = srw.weigh_deterministic(data)
    labels = list(tiny_scout.labels_)
    scout_proba = tiny_scout.predict_proba(data)
    compared = 0
    for i, ex in enumerate(data):
        predicted = ordinary.majority[i]

        def mixed(tags, i=i):
            scout = scout_proba[i][np.arange(len(tags)), [labels.index(t) for t in tags]]
            return (1 - CRF_SHARE) * scout + CRF_SHARE * crf.tag_proba([data[i]], [tags])[0]

        p_predicted, p_gold = mixed(predicted), mixed(ex.label)
        assert (p_predicted >= p_gold - 2e-3).all()  # the suggestion is the mixture's own
        for etype, start, end, p in ordinary.majority_entities[i]:
            assert p == pytest.approx(p_predicted[start:end].min(), abs=2e-3)
        of_annotated = {e[:3]: e[3] for e in ordinary.entity_probability[i]}
        for s in span_suggestions(
            ex.label, predicted, ordinary.entity_probability[i], ordinary.majority_entities[i]
        ):
            if s.kind == "type":  # the same words, another type: comparable numbers
                assert s.suggested[3] >= of_annotated[s.annotated[:3]] - 1e-6
                compared += 1
        compared += len(ordinary.majority_entities[i])
    assert compared > 0
