"""backend.serving.reference: a reference corpus that trains a project's scout beside its
annotations, named by a file name in the server's reference folder and read with the engine's
readers. Real files: sentences of CoNLL-2003's training set (IOB1, as distributed) and SST-2."""

from __future__ import annotations

import itertools
import os

import pytest

from backend.config.settings import Settings, SettingsError
from backend.serving.reference import ReferenceError, reference_examples
from subregweigh.io.labelstudio import LabelingSpec
from tests.paths import DATA

NER = LabelingSpec(task="ner", from_name="label", labels=("PER", "ORG", "LOC", "MISC"))
SENTIMENT = LabelingSpec(
    task="classification", from_name="sentiment", labels=("0", "1"), multi_label=False
)


def _conll_sentences(n: int) -> str:
    """The first ``n`` sentences of CoNLL-2003 train as distributed (IOB1, -DOCSTART- lines)."""
    lines, sentences = [], 0
    with open(DATA / "conll2003" / "eng.train", encoding="utf-8") as f:
        for line in f:
            lines.append(line)
            if not line.strip() and lines[-2].strip() and not lines[-2].startswith("-DOCSTART-"):
                sentences += 1
                if sentences == n:
                    break
    return "".join(lines)


def _references(folder):
    """The reference folder of a MODEL_DIR in ``folder``: MODEL_DIR/references."""
    references = folder / "models" / "references"
    references.mkdir(parents=True, exist_ok=True)
    return references


def _settings(folder, name: str) -> Settings:
    return Settings(model_dir=str(folder / "models"), reference=name)


@pytest.mark.parametrize(
    "name",
    ["../models/x.conll", "/etc/passwd", ".hidden", "a/b.conll", "a b.conll", "~x", "x" * 900],
)
def test_a_reference_is_a_file_name_in_the_folder_never_a_path(tmp_path, name):
    with pytest.raises(SettingsError, match=r"SRW_REFERENCE .* it must be a file name in"):
        _settings(tmp_path, name)


def test_a_missing_reference_is_refused_with_the_files_there(tmp_path):
    (_references(tmp_path) / "train.conll").write_text(_conll_sentences(3), encoding="utf-8")
    with pytest.raises(SettingsError) as err:
        _settings(tmp_path, "tarin.conll")
    assert "'tarin.conll'; no such file in" in str(err.value)
    assert str(err.value).endswith("it holds train.conll")


def test_the_folder_defaults_to_model_dir_references(tmp_path):
    folder = tmp_path / "models" / "references"
    folder.mkdir(parents=True)
    (folder / "train.conll").write_text(_conll_sentences(3), encoding="utf-8")
    settings = Settings(model_dir=str(tmp_path / "models"), reference="train.conll")
    assert settings.reference_path == folder / "train.conll"
    assert Settings().reference_path is None


def test_conll_iob1_reads_as_the_projects_iob2_examples(tmp_path):
    (_references(tmp_path) / "train.conll").write_text(_conll_sentences(40), encoding="utf-8")
    examples = reference_examples(_settings(tmp_path, "train.conll"), NER)
    assert len(examples) == 40
    tags = {tag for ex in examples for tag in ex.label}
    assert {"B-ORG", "B-PER", "B-LOC"} <= tags
    for ex in examples:  # IOB2: no span starts with I-
        for prev, tag in itertools.pairwise(("O", *ex.label)):
            assert not (tag.startswith("I-") and prev[2:] != tag[2:])
    assert reference_examples(Settings(), NER) == []


def test_a_changed_file_is_read_again(tmp_path):
    path = _references(tmp_path) / "train.conll"
    path.write_text(_conll_sentences(5), encoding="utf-8")
    settings = _settings(tmp_path, "train.conll")
    assert len(reference_examples(settings, NER)) == 5
    path.write_text(_conll_sentences(7), encoding="utf-8")
    os.utime(path, ns=(1, 1))  # another mtime even within the clock's resolution
    assert len(reference_examples(settings, NER)) == 7


def test_labels_the_config_lacks_are_named(tmp_path):
    (_references(tmp_path) / "train.conll").write_text(_conll_sentences(40), encoding="utf-8")
    spec = LabelingSpec(task="ner", from_name="label", labels=("PER", "ORG"))
    with pytest.raises(ReferenceError) as err:
        reference_examples(_settings(tmp_path, "train.conll"), spec)
    assert "uses labels the project's config does not have: LOC, MISC" in str(err.value)
    assert "(the project's: PER, ORG)" in str(err.value)


def test_another_task_is_refused(tmp_path):
    lines = (DATA / "sst2" / "train.tsv").read_text(encoding="utf-8").splitlines()[:20]
    (_references(tmp_path) / "sst2.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ReferenceError, match="holds text classes; the project labels entity"):
        reference_examples(_settings(tmp_path, "sst2.tsv"), NER)
    assert len(reference_examples(_settings(tmp_path, "sst2.tsv"), SENTIMENT)) == 19


def test_several_labels_for_a_single_choice_project_are_refused(tmp_path):
    (_references(tmp_path) / "multi.jsonl").write_text(
        '{"id": "a", "text": "fine", "labels": ["0", "1"]}\n', encoding="utf-8"
    )
    with pytest.raises(ReferenceError, match="gives example a several labels; the project's"):
        reference_examples(_settings(tmp_path, "multi.jsonl"), SENTIMENT)


def test_a_broken_file_says_where(tmp_path):
    (_references(tmp_path) / "broken.conll").write_text("EU B-ORG\nrejects\n", encoding="utf-8")
    with pytest.raises(ReferenceError) as err:
        reference_examples(_settings(tmp_path, "broken.conll"), NER)
    assert str(err.value).startswith("the reference broken.conll cannot be read:")
    assert "broken.conll:2: expected 2 or 4 columns" in str(err.value)


def test_an_empty_file_is_refused(tmp_path):
    (_references(tmp_path) / "empty.conll").write_text("\n", encoding="utf-8")
    with pytest.raises(ReferenceError, match="empty.conll"):
        reference_examples(_settings(tmp_path, "empty.conll"), NER)
