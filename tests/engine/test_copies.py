"""Copies that disagree (subregweigh.copies): the links against a pairwise oracle, the
decided copies' count, the bounded notes; and the served policy they feed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subregweigh import copies
from subregweigh.copies import Labelled, by_control, contradicted, find_copies, links, note
from subregweigh.served import SLIP_BOOST, served_score
from subregweigh.tags import entity_spans

WORDS = ("Raw", "raw", "Illest", "is", "here")


def _tags(choices) -> tuple[str, ...]:
    tags, prev = [], "O"
    for c in choices:
        tag = (f"I-{prev[2:]}" if prev != "O" else "O") if c == "I" else c
        tags.append(tag)
        prev = tag
    return tuple(tags)


@st.composite
def ner_task(draw, task: str):
    n = draw(st.integers(1, 4))
    words = tuple(draw(st.lists(st.sampled_from(WORDS), min_size=n, max_size=n)))
    n_ann = draw(st.integers(0, 2))
    labels = tuple(
        _tags(draw(st.lists(st.sampled_from(["O", "B-PER", "B-ORG", "I"]), min_size=n, max_size=n)))
        for _ in range(n_ann)
    )
    return Labelled(task, words, labels)


ner_tasks = st.integers(1, 7).flatmap(
    lambda n: st.tuples(*(ner_task(str(i + 1)) for i in range(n)))
)
cls_tasks = st.lists(
    st.tuples(
        st.lists(st.sampled_from(("good", "bad", "film")), min_size=1, max_size=2),
        st.sampled_from([(), (("positive",),), (("negative",),), (("negative", "positive"),)]),
    ),
    min_size=1,
    max_size=7,
).map(lambda rows: [Labelled(str(i + 1), tuple(w), lab) for i, (w, lab) in enumerate(rows)])


def _oracle(tasks, kind) -> dict[str, set[str]]:
    """Every pair compared: the same text labelled otherwise, or an entity string both annotate
    with other types."""

    def strings(item):
        out: dict[str, set] = {}
        for tags in item.labels:
            for t, s, e in entity_spans(tags):
                out.setdefault(" ".join(item.words[s:e]), set()).add(t)
        return out

    linked = {t.task: set() for t in tasks}
    for a in tasks:
        for b in tasks:
            if a.task == b.task or not a.labels or not b.labels:
                continue
            same_text = " ".join(a.words) == " ".join(b.words)
            if same_text and set(a.labels) != set(b.labels):
                linked[a.task].add(b.task)
            if kind == "ner":
                sa, sb = strings(a), strings(b)
                if any(sa[k] != sb[k] for k in sa.keys() & sb.keys()):
                    linked[a.task].add(b.task)
    return linked


@settings(max_examples=200, deadline=None)
@given(ner_tasks)
def test_ner_links_are_the_pairwise_oracles(tasks):
    found = find_copies(tasks, "ner")
    oracle = _oracle(tasks, "ner")
    for item in tasks:
        assert found.linked(item.task) == oracle[item.task]
        assert (item.task in found.of_task) == bool(oracle[item.task])


@settings(max_examples=200, deadline=None)
@given(cls_tasks)
def test_classification_links_are_the_pairwise_oracles(tasks):
    found = find_copies(tasks, "classification")
    oracle = _oracle(tasks, "classification")
    assert {t.task: found.linked(t.task) for t in tasks} == oracle
    assert all(group.kind == copies.TEXT for group in found.groups)


@settings(max_examples=100, deadline=None)
@given(ner_tasks, st.randoms(use_true_random=False))
def test_links_do_not_depend_on_the_order_of_the_tasks(tasks, rng):
    shuffled = list(tasks)
    rng.shuffle(shuffled)
    a, b = find_copies(tasks, "ner"), find_copies(shuffled, "ner")
    assert {t.task: a.linked(t.task) for t in tasks} == {t.task: b.linked(t.task) for t in tasks}


@settings(max_examples=200, deadline=None)
@given(ner_tasks, st.data())
def test_decided_copies_are_counted_once_each(tasks, data):
    found = find_copies(tasks, "ner")
    ids = [t.task for t in tasks]
    chosen = data.draw(st.lists(st.sampled_from(ids), unique=True))
    decided = {t: data.draw(st.sampled_from([copies.CONFIRMED, copies.FIXED])) for t in chosen}
    counts = contradicted(found, decided)
    oracle = _oracle(tasks, "ner")
    for task in ids:
        want = min(len(oracle[task] & set(decided)), copies.MAX_CONTRADICTED)
        assert counts.get(task, 0) == want


@settings(max_examples=200, deadline=None)
@given(ner_tasks, st.data())
def test_links_name_only_disagreeing_tasks_each_once_and_count_the_rest(tasks, data):
    found = find_copies(tasks, "ner")
    decided = {t.task: copies.FIXED for t in tasks if data.draw(st.booleans())}
    oracle = _oracle(tasks, "ner")
    for item in tasks:
        got = links(found, item.task, decided)
        named = [o.task for link in got for o in link.named]
        assert len(named) == len(set(named)) and set(named) <= oracle[item.task]
        assert len(got) <= copies.MAX_LINKS
        assert all(1 <= len(link.named) <= copies.MAX_NAMED and link.more >= 0 for link in got)
        assert (note(got) is None) == (not got)
        if oracle[item.task]:
            assert got  # a task with a copy that disagrees names one
        for link in got:  # decided copies are named first
            ranks = [o.decision is None for o in link.named]
            assert ranks == sorted(ranks)


TWEET = tuple("RT @x : Raw Illest live tonight".split())
AS_GROUP = ("O", "O", "O", "B-group", "I-group", "O", "O")
AS_PERSON = ("O", "O", "O", "B-person", "I-person", "O", "O")


def test_two_identical_tweets_name_each_other():
    found = find_copies(
        [Labelled("12", TWEET, (AS_GROUP,)), Labelled("260", TWEET, (AS_PERSON,))], "ner"
    )
    assert note(links(found, "12")) == "task 260, the same text, labels 'Raw Illest' as person"
    assert note(links(found, "260")) == "task 12, the same text, labels 'Raw Illest' as group"
    fixed = note(links(found, "260", {"12": copies.FIXED}))
    assert fixed == (
        "task 12, the same text, was fixed to label 'Raw Illest' as group by a reviewer: "
        "suggested here"
    )


def test_the_same_entity_string_in_other_texts():
    other = tuple("Raw Illest drops a video".split())
    found = find_copies(
        [
            Labelled("12", TWEET, (AS_GROUP,)),
            Labelled("7", other, (("B-person", "I-person", "O", "O", "O"),)),
        ],
        "ner",
    )
    assert note(links(found, "12")) == "task 7 labels 'Raw Illest' as person"
    assert note(links(found, "7", {"12": copies.CONFIRMED})) == (
        "task 12 labels 'Raw Illest' as group, confirmed by a reviewer"
    )


def test_whitespace_is_normalised_and_case_kept():
    spaced = Labelled("1", ("a", "film "), (("positive",),))
    plain = Labelled("2", ("a", "film"), (("negative",),))
    upper = Labelled("3", ("A", "film"), (("negative",),))
    found = find_copies([spaced, plain, upper], "classification")
    assert found.linked("1") == {"2"} and "3" not in found.of_task
    assert note(links(found, "2")) == "task 1, the same text, is annotated positive"
    ner = find_copies(
        [
            Labelled("1", ("Raw", "Illest"), (("B-PER", "I-PER"),)),
            Labelled("2", ("RAW", "ILLEST"), (("B-ORG", "I-ORG"),)),
        ],
        "ner",
    )
    assert not ner.groups  # another case is another string


def test_a_large_group_is_named_in_bounds_and_counted():
    tasks = [Labelled(str(i), ("good", "film"), (("positive",),)) for i in range(1, 200)]
    tasks.append(Labelled("500", ("good", "film"), (("negative",),)))
    found = find_copies(tasks, "classification")
    (link,) = links(found, "500")
    assert [o.task for o in link.named] == ["1", "2", "3"] and link.more == 196
    assert note([link]).endswith("and 196 more tasks of the same text are annotated otherwise")
    (link,) = links(found, "7")
    assert [o.task for o in link.named] == ["500"] and link.more == 0


def test_unannotated_tasks_are_linked_to_nothing():
    found = find_copies(
        [Labelled("1", ("good",), ()), Labelled("2", ("good",), (("positive",),))],
        "classification",
    )
    assert not found.groups and links(found, "1") == ()


@pytest.mark.parametrize("n", [0, 1, 3])
def test_each_decided_copy_halves_the_served_score(n):
    assert served_score(0.8, contradicted=n) == pytest.approx(0.8 * SLIP_BOOST**n)
    assert served_score(0.8, repeats=1, contradicted=n) == pytest.approx(
        0.8 * SLIP_BOOST ** (n + 1)
    )
    assert served_score(0.8, confirmed=True, contradicted=n) == 1.0
    got = served_score([0.8, 0.4], contradicted=[n, 0])
    assert got.tolist() == pytest.approx([0.8 * SLIP_BOOST**n, 0.4])


def test_copies_by_control_keep_each_controls_groups_apart():
    """Each control's copies found over its labels alone, joined: a group names its control
    and its kind of labels, and a task's links say which control they are about."""
    words = ("Raw", "Illest", "is", "here")
    ner = find_copies(
        [
            Labelled("1", words, (("B-PER", "I-PER", "O", "O"),)),
            Labelled("2", words, (("B-ORG", "I-ORG", "O", "O"),)),
        ],
        "ner",
    )
    topic = find_copies(
        [Labelled("1", words, (("music",),)), Labelled("3", words, (("sports",),))],
        "classification",
    )
    joined = by_control({"ner": ner, "topic": topic})
    assert [(g.control, g.task, g.kind) for g in joined.groups] == [
        ("ner", "ner", "text"),
        ("ner", "ner", "entity"),
        ("topic", "classification", "text"),
    ]
    assert joined.of_task == {"1": (0, 1, 2), "2": (0, 1), "3": (2,)}
    found = links(joined, "1")
    assert [(link.control, [o.task for o in link.named]) for link in found] == [
        ("ner", ["2"]),
        ("topic", ["3"]),
    ]
    assert note(found[1:]) == "task 3, the same text, is annotated sports"
