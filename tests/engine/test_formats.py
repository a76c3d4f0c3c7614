from __future__ import annotations

import csv
import json
import os
from collections import Counter

import numpy as np
import pytest

from subregweigh.example import DataError, Example
from subregweigh.io import (
    atomic_open,
    atomic_write_text,
    read_conll,
    read_dataset,
    read_jsonl,
    read_tsv,
    read_weighted_conll,
    read_weights,
    write_weighted_conll,
    write_weighted_jsonl,
    write_weights,
)
from subregweigh.tags import entity_spans
from tests.paths import DATA, write


@pytest.fixture(scope="module")
def eng_train():
    return read_conll(DATA / "conll2003" / "eng.train")


def raises_at(exc_match: str):
    return pytest.raises(DataError, match=exc_match)


# --------------------------------------------------------------------------- CoNLL, real data


def test_eng_train_counts_match_sources(eng_train):
    assert len(eng_train) == 14041
    assert sum(len(ex.words) for ex in eng_train) == 203621
    types = Counter(t for ex in eng_train for t, _, _ in entity_spans(ex.label))
    assert sum(types.values()) == 23499
    assert types == {"PER": 6600, "LOC": 7140, "ORG": 6321, "MISC": 3438}
    assert [ex.id for ex in eng_train[:3]] == ["0", "1", "2"]
    assert eng_train[0].words[:2] == ("EU", "rejects")
    assert eng_train[0].label[:3] == ("B-ORG", "O", "B-MISC")
    assert eng_train[0].source.endswith("eng.train:1")  # first DOCSTART was moved to the end


def test_eng_train_equals_conllpp(eng_train):
    pp = read_conll(DATA / "conllpp" / "conllpp_train.txt")
    assert len(pp) == len(eng_train)
    for a, b in zip(eng_train, pp):
        assert (a.words, a.label) == (b.words, b.label)


def test_forced_scheme_on_real_file_fails_at_right_line():
    # eng.train is IOB1: line 1 is "EU NNP I-NP I-ORG", which IOB2 forbids
    with raises_at(r"eng\.train:1: 'I-ORG' follows sentence start"):
        read_conll(DATA / "conll2003" / "eng.train", scheme="IOB2")


# --------------------------------------------------------------------------- CoNLL, small files


def test_conll_two_columns_crlf_whitespace_separators(tmp_path):
    text = (
        "-DOCSTART- O\nJohn I-PER\nSmith I-PER\n   \t\nin O\nParis I-LOC\n-DOCSTART- O\nHi O\n\n\n"
    )
    for nl in ("\n", "\r\n"):
        p = write(tmp_path, "a.conll", text, nl)
        exs = read_conll(p)
        assert [ex.words for ex in exs] == [("John", "Smith"), ("in", "Paris"), ("Hi",)]
        assert [ex.label for ex in exs] == [("B-PER", "I-PER"), ("O", "B-LOC"), ("O",)]
        assert [ex.source for ex in exs] == [f"{p}:2", f"{p}:5", f"{p}:8"]


def test_conll_forced_iob1_and_tag_column(tmp_path):
    p = write(tmp_path, "b.conll", "A x I-NP B-PER\nB x I-NP I-PER\n")
    # auto sees no I- starting a span -> IOB2, kept as is
    assert read_conll(p)[0].label == ("B-PER", "I-PER")
    assert read_conll(p, tag_column=2)[0].label == ("B-NP", "I-NP")
    q = write(tmp_path, "c.conll", "A x B-NP I-PER\n")
    assert read_conll(q, scheme="IOB1")[0].label == ("B-PER",)


@pytest.mark.parametrize(
    "read, text, match",
    [
        (read_conll, "a O\nb O O\n", r"bad\.conll:2: expected 2 or 4 columns, got 3"),
        (read_conll, "a O\n\nb x y O\n", r"bad\.conll:3: expected 2 columns like line 1, got 4"),
        (read_conll, "a O\nb O\n\nc PER\n", r"bad\.conll:4: unknown tag 'PER'"),
        (read_conll, "a O\nb B-X\nc E-X\n", r"bad\.conll:3: unknown tag 'E-X'"),
        (read_conll, "", r"bad\.conll:1: no sentences"),
        (read_conll, "-DOCSTART- -X- O O\n\n\n", r"bad\.conll:3: no sentences"),
        # the weighted outputs' CoNLL: word, tag and weight
        (
            read_weighted_conll,
            "x\tB-PER\t1\ny\tI-LOC\t1\n",
            r"bad\.conll:2: 'I-LOC' follows 'B-PER'",
        ),
        (read_weighted_conll, "x\tO\t1\ny\tO\n", r"bad\.conll:2: expected 3 columns"),
        (read_weighted_conll, "\n\n", r"bad\.conll:2: no sentences"),
    ],
)
def test_conll_errors_name_file_and_line(tmp_path, read, text, match):
    p = write(tmp_path, "bad.conll", text)
    with raises_at(match):
        read(p)


def test_conll_forced_iob2_inconsistent_tag(tmp_path):
    p = write(tmp_path, "bad.conll", "a B-PER\nb I-PER\nc I-LOC\n", "\r\n")
    with raises_at(r"bad\.conll:3: 'I-LOC' follows 'I-PER'"):
        read_conll(p, scheme="IOB2")


def test_conll_bad_utf8(tmp_path):
    p = tmp_path / "bad.conll"
    p.write_bytes(b"a O\nb O\n\xff O\n")
    with raises_at(r"bad\.conll:3: not valid UTF-8"):
        read_conll(p)


# --------------------------------------------------------------------------- TSV


def test_sst2_train():
    exs = read_tsv(DATA / "sst2" / "train.tsv")
    assert len(exs) == 67349
    assert Counter(ex.label for ex in exs) == {("0",): 29780, ("1",): 37569}
    assert exs[0].words == ("hide", "new", "secretions", "from", "the", "parental", "units")
    assert exs[0].source.endswith("train.tsv:2")


def test_tsv_multilabel_and_columns(tmp_path):
    p = write(tmp_path, "m.tsv", "id\ttext\ttags\n1\tgood  film \tpos,art\n2\tbad\tneg\n\n", "\r\n")
    exs = read_tsv(p, text_column="text", label_column="tags")
    assert [ex.label for ex in exs] == [("art", "pos"), ("neg",)]
    assert exs[0].words == ("good", "film")
    assert [ex.id for ex in exs] == ["0", "1"]


@pytest.mark.parametrize(
    "text, match",
    [
        ("sentence\tlabel\nok\t1\n  \t0\n", r"bad\.tsv:3: empty text"),
        ("sentence\tlabel\nok\t1\nfine\t\n", r"bad\.tsv:3: empty label"),
        (
            "sentence\tlabel\nok\t1\nno tab 1\n",
            r"bad\.tsv:3: expected 2 tab-separated fields, got 1",
        ),
        (
            "text\tlabel\nok\t1\n",
            r"bad\.tsv:1: no column 'sentence'; the columns are \['text', 'label'\]",
        ),
        ("", r"bad\.tsv:1: expected a header"),
        ("sentence\tlabel\n", r"bad\.tsv:1: no examples"),
    ],
)
def test_tsv_errors(tmp_path, text, match):
    with raises_at(match):
        read_tsv(write(tmp_path, "bad.tsv", text))


# --------------------------------------------------------------------------- JSONL


def test_jsonl_ner_and_classification(tmp_path):
    p = write(
        tmp_path,
        "n.jsonl",
        '{"id": "a", "words": ["J", "S"], "tags": ["B-PER", "I-PER"]}\n\n'
        '{"words": ["x"], "tags": ["O"]}\n',
    )
    exs, task = read_jsonl(p)
    assert task == "ner"
    assert [(ex.id, ex.words, ex.label) for ex in exs] == [
        ("a", ("J", "S"), ("B-PER", "I-PER")),
        ("1", ("x",), ("O",)),
    ]
    assert exs[1].source == f"{p}:3"
    q = write(
        tmp_path,
        "c.jsonl",
        '{"id": 5, "text": " a  b ", "label": 1}\n{"text": "c", "labels": ["z", "y", "z"]}\n',
    )
    exs, task = read_jsonl(q)
    assert task == "classification"
    assert [(ex.id, ex.words, ex.label) for ex in exs] == [
        ("5", ("a", "b"), ("1",)),
        ("1", ("c",), ("y", "z")),
    ]


@pytest.mark.parametrize(
    "second_line, match",
    [
        ('{"words": ["a"], "tags": ["O"]', r"bad\.jsonl:2: invalid JSON"),
        ('{"words": ["a", "b"], "tags": ["O"]}', r"bad\.jsonl:2: 2 words but 1 tags"),
        ('{"words": ["a"]}', r"bad\.jsonl:2: .*no 'tags'"),
        ('{"text": "a", "label": "x"}', r"bad\.jsonl:2: classification object, but line 1 is ner"),
        ('{"words": [], "tags": []}', r"bad\.jsonl:2: empty 'words'"),
        ('{"words": ["a"], "tags": ["I-PER"]}', r"bad\.jsonl:2: word 0: 'I-PER'"),
        ('{"id": "0", "words": ["a"], "tags": ["O"]}', r"bad\.jsonl:2: duplicate id '0'"),
        ('{"foo": 1}', r"bad\.jsonl:2: expected 'words'"),
        ("[1, 2]", r"bad\.jsonl:2: expected a JSON object"),
    ],
)
def test_jsonl_errors(tmp_path, second_line, match):
    p = write(tmp_path, "bad.jsonl", '{"words": ["a"], "tags": ["O"]}\n' + second_line + "\n")
    with raises_at(match):
        read_jsonl(p)


@pytest.mark.parametrize(
    "line, match",
    [
        ('{"text": "   ", "label": "x"}', r"bad\.jsonl:1: empty 'text'"),
        ('{"text": "a"}', r"bad\.jsonl:1: .*exactly one of 'label', 'labels'"),
        ('{"text": "a", "label": "x", "labels": ["x"]}', r"bad\.jsonl:1: .*exactly one"),
    ],
)
def test_jsonl_classification_errors(tmp_path, line, match):
    with raises_at(match):
        read_jsonl(write(tmp_path, "bad.jsonl", line + "\n"))


# --------------------------------------------------------------------------- dispatch


def test_read_dataset_dispatch(tmp_path):
    conll = write(tmp_path, "eng.testx", "a I-PER\n")
    exs, task = read_dataset(conll)
    assert task == "ner" and exs[0].label == ("B-PER",)
    tsv = write(tmp_path, "d.tsv", "sentence\tlabel\nhi\t1\n")
    assert read_dataset(tsv)[1] == "classification"
    js = write(tmp_path, "d.json", '{"text": "hi", "label": "1"}\n')
    assert read_dataset(js)[1] == "classification"
    # a forced format wins over the extension
    assert (
        read_dataset(write(tmp_path, "x.dat", "sentence\tlabel\nhi\t1\n"), format="tsv")[1]
        == "classification"
    )
    with pytest.raises(DataError):
        read_dataset(write(tmp_path, "x.csv", "a,b\n"))


def test_read_dataset_rejects_duplicate_ids(tmp_path):
    p = write(
        tmp_path,
        "d.jsonl",
        '{"id": "k", "text": "a", "label": "x"}\n{"id": "k", "text": "b", "label": "y"}\n',
    )
    with raises_at(r"d\.jsonl:2: duplicate id 'k'"):
        read_dataset(p)


# --------------------------------------------------------------------------- atomic writes


def test_atomic_write_leaves_existing_file_on_failure(tmp_path):
    target = tmp_path / "out.jsonl"
    target.write_text("precious\n")
    exs = [Example(str(i), ("w",), ("x",)) for i in range(3)]
    bad = {"note": ["ok", "ok", object()]}  # the last value is not JSON serializable
    with pytest.raises(TypeError):
        write_weighted_jsonl(target, exs, [1.0, 0.5, 0.2], bad, task="classification")
    assert target.read_text() == "precious\n"
    assert sorted(os.listdir(tmp_path)) == ["out.jsonl"]
    with pytest.raises(RuntimeError):
        with atomic_open(target) as f:
            f.write("half")
            raise RuntimeError("boom")
    assert target.read_text() == "precious\n"
    assert sorted(os.listdir(tmp_path)) == ["out.jsonl"]


def test_atomic_write_success(tmp_path):
    target = tmp_path / "t.txt"
    atomic_write_text(target, "a\nb\n")
    assert target.read_bytes() == b"a\nb\n"
    with atomic_open(target, "wb") as f:
        f.write(b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert os.listdir(tmp_path) == ["t.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600
    target.chmod(0o640)
    atomic_write_text(target, "c")
    assert target.stat().st_mode & 0o777 == 0o640  # an existing file keeps its mode


# --------------------------------------------------------------------------- weighted outputs


def test_weighted_conll_roundtrip(eng_train, tmp_path):
    exs = eng_train[:500]
    rng = np.random.default_rng(0)
    w = rng.random(len(exs))
    w[:3] = [1.0, 0.0, 1 / 3]
    p = tmp_path / "w.conll"
    write_weighted_conll(p, exs, w)
    lines = p.read_text().split("\n")
    assert lines[0] == f"{exs[0].words[0]}\t{exs[0].label[0]}\t1.0"
    back, back_w = read_weighted_conll(p)
    assert [(e.words, e.label) for e in back] == [(e.words, e.label) for e in exs]
    assert np.array_equal(back_w, w)
    got = read_weights(p, exs)
    assert got.shape == (500,) and np.array_equal(got, w)


def test_weighted_jsonl_and_csv_roundtrip(tmp_path):
    ner = [Example("a", ("J", "S"), ("B-PER", "I-PER")), Example("b", ("x",), ("O",))]
    cls = [Example("a", ("good", "film"), ("pos",)), Example("b", ("x",), ("art", "neg"))]
    w = np.array([0.25, 1.0])
    extra = {
        "reliability": np.array([0.5, np.float32(1)]),
        "c": np.array([3, 4]),
        "pred": [("B-PER", "O"), None],
        "probs": np.array([[0.1, 0.9], [np.nan, 1.0]]),
    }
    p = tmp_path / "n.jsonl"
    write_weights(p, ner, w, task="ner", extra=extra)
    recs = [json.loads(x) for x in p.read_text().splitlines()]
    assert recs[0] == {
        "id": "a",
        "words": ["J", "S"],
        "tags": ["B-PER", "I-PER"],
        "weight": 0.25,
        "reliability": 0.5,
        "c": 3,
        "pred": ["B-PER", "O"],
        "probs": [0.1, 0.9],
    }
    assert recs[1]["probs"] == [None, 1.0]
    exs, task = read_jsonl(p)  # the output is itself a valid input file
    assert task == "ner" and exs == ner
    assert np.array_equal(read_weights(p, ner), w)

    q = tmp_path / "c.jsonl"
    write_weights(q, cls, w, task="classification")
    recs = [json.loads(x) for x in q.read_text().splitlines()]
    assert recs[0] == {"id": "a", "text": "good film", "label": "pos", "weight": 0.25}
    assert recs[1]["labels"] == ["art", "neg"]
    assert read_jsonl(q)[0] == cls

    c = tmp_path / "c.csv"
    write_weights(c, cls, w, task="classification", extra={"c": [1, 2]})
    with open(c, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[1] == {"id": "b", "text": "x", "label": "art,neg", "weight": "1.0", "c": "2"}
    # rows in a different order are still matched by id
    lines = c.read_text().splitlines()
    c.write_text("\n".join([lines[0], lines[2], lines[1]]) + "\n")
    assert np.array_equal(read_weights(c, cls), w)


def test_write_weights_rejects(tmp_path):
    exs = [Example("a", ("x",), ("O",))]
    with pytest.raises(DataError, match="unknown output extension"):
        write_weights(tmp_path / "w.parquet", exs, [1.0], task="ner")
    with pytest.raises(DataError):
        write_weights(tmp_path / "w.conll", exs, [1.0], task="classification")
    with pytest.raises(ValueError):
        write_weights(tmp_path / "w.jsonl", exs, [1.0, 2.0], task="ner")
    with pytest.raises(ValueError, match="reserved"):
        write_weights(tmp_path / "w.jsonl", exs, [1.0], task="ner", extra={"weight": [1]})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "name, text, match",
    [
        (
            "w.jsonl",
            '{"id": "a", "weight": 1}\n{"id": "q", "weight": 1}\n',
            r"w\.jsonl:2: unknown id 'q'",
        ),
        ("w.jsonl", '{"id": "a", "weight": 1}\n', r"w\.jsonl: no weight for id\(s\) \['b'\]"),
        ("w.csv", "id,weight\na,1\nb,x\n", r"w\.csv:3: weight must be a number"),
        # CoNLL: matched by order
        (
            "w.conll",
            "x\tO\t0.5\ny\tO\t0.5\n\nz\tO\t1.0\n\nextra\tO\t1.0\n",
            r"w\.conll:6: more sentences than the 2 examples",
        ),
        ("w.conll", "x\tO\t0.5\ny\tO\t0.5\n\n", r"w\.conll:3: 1 sentences, expected 2"),
        (
            "w.conll",
            "x\tO\t0.5\nY\tO\t0.5\n\nz\tO\t1.0\n",
            r"w\.conll:2: word 'Y' does not match example 'a'",
        ),
        (
            "w.conll",
            "x\tO\t0.5\n\nz\tO\t1.0\n",
            r"w\.conll:1: sentence 0 .* ends after 1 words, expected 2",
        ),
        ("w.conll", "x\tO\t0.5\ny\tO\t0.7\n\nz\tO\t1.0\n", r"w\.conll:2: weight 0.7 differs"),
    ],
)
def test_read_weights_errors(tmp_path, name, text, match):
    exs = [Example("a", ("x", "y"), ("O", "O")), Example("b", ("z",), ("O",))]
    p = write(tmp_path, name, text)
    with raises_at(match):
        read_weights(p, exs)
