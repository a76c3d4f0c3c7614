"""The command line, in-process (``cli.main``) and once as ``python -m subregweigh``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from subregweigh import cli
from subregweigh.build import weigher_params
from subregweigh.cli_args import build_parser
from subregweigh.io import read_conll, read_dataset, write_dataset
from subregweigh.options import option_values
from tests.paths import DATA, write

CONLLPP_TRAIN = DATA / "conllpp" / "conllpp_train.txt"
CONLLPP_DEV = DATA / "conllpp" / "conllpp_dev.txt"


def test_module_help_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "subregweigh", "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    for command in ("weigh", "train", "noise", "evaluate", "report", "selftest"):
        assert command in proc.stdout
    assert "usage: subregweigh" in proc.stdout


def test_no_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2
    assert "required" in capsys.readouterr().err


# ------------------------------------------------------------------------------ bad input


def _fails_cleanly(capsys, argv, *needles):
    """Exit status 2 and one stderr line containing every needle, no traceback."""
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    command = next(a for a in argv if not a.startswith("-"))
    assert lines[0].startswith(f"subregweigh {command}: error: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


def test_malformed_conll(tmp_path, capsys):
    bad = write(tmp_path, "bad.conll", "EU B-ORG\nrejects O\n\nPeter NNP B-PER\n")
    for command in (
        ["noise", str(bad), "-o", str(tmp_path / "n.conll"), "--flags", str(tmp_path / "f.jsonl")],
        ["weigh", str(bad), "-o", str(tmp_path / "w.jsonl")],
    ):
        _fails_cleanly(capsys, command, f"{bad}:4:", "expected 2 or 4 columns, got 3")
    bad.write_text("EU B-ORG\nrejects O\n\nPeter PER\n")
    _fails_cleanly(
        capsys,
        ["weigh", str(bad), "-o", str(tmp_path / "w.jsonl"), "--format", "conll"],
        f"{bad}:4:",
        "unknown tag 'PER'",
    )
    assert not (tmp_path / "w.jsonl").exists() and not (tmp_path / "n.conll").exists()


def test_malformed_tsv(tmp_path, capsys):
    bad = write(tmp_path, "bad.tsv", "sentence\tlabel\ngood film\t1\nbad film\n")
    _fails_cleanly(
        capsys,
        ["weigh", str(bad), "-o", str(tmp_path / "w.jsonl")],
        f"{bad}:3:",
        "expected 2 tab-separated fields, got 1",
    )


def test_missing_file(tmp_path, capsys):
    missing = tmp_path / "nope.conll"
    _fails_cleanly(capsys, ["weigh", str(missing), "-o", str(tmp_path / "w.jsonl")], str(missing))
    _fails_cleanly(
        capsys, ["evaluate", "--scores", str(missing), "--flags", str(missing)], str(missing)
    )


@pytest.mark.parametrize("name", ["empty.conll", "empty.tsv", "empty.jsonl"])
def test_empty_file(tmp_path, capsys, name):
    empty = tmp_path / name
    empty.write_text("")
    _fails_cleanly(capsys, ["weigh", str(empty), "-o", str(tmp_path / "w.jsonl")], f"{empty}:1:")


def _weigher_params(args) -> dict:
    return weigher_params(option_values(args))


def test_n_jobs_reaches_the_engine_and_is_checked(tmp_path, capsys):
    parser = build_parser()
    args = parser.parse_args(["weigh", "d.conll", "-o", "w.jsonl", "--n-jobs", "-1"])
    assert _weigher_params(args)["n_jobs"] == -1
    assert _weigher_params(parser.parse_args(["weigh", "d.conll", "-o", "w.jsonl"]))["n_jobs"] == 1
    data = tmp_path / "train.conll"
    write_dataset(data, read_conll(CONLLPP_TRAIN)[:5], task="ner")
    out = tmp_path / "w.jsonl"
    _fails_cleanly(capsys, ["weigh", str(data), "-o", str(out), "--n-jobs", "0"], "n_jobs", "0")
    assert not out.exists()


def test_flag_spellings_dropout_and_n_samples(capsys):
    """-p/--dropout is the dropout strength; --n-samples is N."""
    parser = build_parser()
    base = ["weigh", "d.conll", "-o", "w.jsonl"]
    for argv in (["-p", "0.2"], ["--dropout", "0.2"]):
        assert _weigher_params(parser.parse_args(base + argv))["p"] == 0.2
    assert _weigher_params(parser.parse_args(base + ["--n-samples", "40"]))["n_samples"] == 40
    assert _weigher_params(parser.parse_args(base))["n_samples"] == 500
    assert capsys.readouterr().err == ""


def test_unknown_output_extension_leaves_nothing(tmp_path, capsys):
    data = tmp_path / "train.conll"
    write_dataset(data, read_conll(CONLLPP_TRAIN)[:10], task="ner")
    out = tmp_path / "noisy.xyz"
    _fails_cleanly(
        capsys,
        ["noise", str(data), "-o", str(out), "--flags", str(tmp_path / "f.jsonl")],
        str(out),
        "as .xyz",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.conll"]  # no temp file, no flags


def test_existing_output_untouched_on_failure(tmp_path, capsys):
    tsv = write(tmp_path, "data.tsv", "sentence\tlabel\ngood film\t1\nbad film\t0\nfine\t1\n")
    out = write(tmp_path, "noisy.conll", "precious\tO\n\n")
    flags = write(tmp_path, "flags.jsonl", '{"id": "0", "corrupted": true}\n')
    # classification data cannot be written as CoNLL: fails inside the atomic write
    _fails_cleanly(
        capsys,
        ["noise", str(tsv), "-o", str(out), "--flags", str(flags), "--rate", "0.5"],
        str(out),
        "cannot write classification data as .conll",
    )
    assert out.read_text() == "precious\tO\n\n"
    assert flags.read_text() == '{"id": "0", "corrupted": true}\n'
    # bad input: outputs untouched as well
    bad = write(tmp_path, "bad.conll", "a b c\n")
    _fails_cleanly(capsys, ["noise", str(bad), "-o", str(out), "--flags", str(flags)], f"{bad}:1:")
    assert out.read_text() == "precious\tO\n\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.conll",
        "data.tsv",
        "flags.jsonl",
        "noisy.conll",
    ]


def test_evaluate_bad_scores_file(tmp_path, capsys):
    scores = write(tmp_path, "scores.jsonl", '{"id": "0", "reliability": 0.5}\n{"id": 1,\n')
    flags = write(tmp_path, "flags.jsonl", '{"id": "0", "corrupted": false}\n')
    _fails_cleanly(
        capsys,
        ["evaluate", "--scores", str(scores), "--flags", str(flags)],
        f"{scores}:2:",
        "invalid JSON",
    )
    scores.write_text('{"id": "1", "reliability": 0.5}\n')
    _fails_cleanly(
        capsys, ["evaluate", "--scores", str(scores), "--flags", str(flags)], "no score for id '0'"
    )
    _fails_cleanly(capsys, ["evaluate", "--scores", str(scores)], "--scores and --flags")


# ------------------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_noise_weigh_evaluate_train(tmp_path, capsys):
    noisy, flags = tmp_path / "noisy.conll", tmp_path / "flags.jsonl"
    assert (
        cli.main(
            [
                "-q",
                "noise",
                str(CONLLPP_TRAIN),
                "--limit",
                "40",
                "-o",
                str(noisy),
                "--flags",
                str(flags),
                "--rate",
                "0.1",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    examples, task = read_dataset(noisy)
    assert task == "ner" and len(examples) == 40
    flag_rows = [json.loads(line) for line in flags.read_text().splitlines()]
    assert [r["id"] for r in flag_rows] == [ex.id for ex in examples]
    clean = read_conll(CONLLPP_TRAIN)[:40]
    assert [r["corrupted"] for r in flag_rows] == [
        a.label != b.label for a, b in zip(clean, examples)
    ]
    assert any(r["corrupted"] for r in flag_rows) and not all(r["corrupted"] for r in flag_rows)
    capsys.readouterr()

    weights, scout_dir = tmp_path / "weights.jsonl", tmp_path / "scout"
    small = ["--n-samples", "30", "-k", "5", "--epochs", "1"]
    assert (
        cli.main(
            ["-q", "weigh", str(noisy), "-o", str(weights), *small, "--save-scout", str(scout_dir)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "of 40 examples have deterministic < 0.5" in out
    rows = [json.loads(line) for line in weights.read_text().splitlines()]
    assert [r["id"] for r in rows] == [ex.id for ex in examples]
    for r in rows:
        assert r["k"] <= 5 and r["reliability"] == r["agreement"] / r["k"]
        # the default ranking is p(gold) on the ordinary tokenization, a probability too
        assert r["score"] == r["deterministic_probability"] and 0.0 <= r["probability"] <= 1.0
        assert 0.0 <= r["deterministic_probability"] <= 1.0
        assert r["weight"] == pytest.approx(max(1 / 3, r["reliability"]))
        assert "entities" in r and "majority" in r
    assert (scout_dir / "scout" / "scout.json").is_file() and (scout_dir / "crf.npz").is_file()

    assert (
        cli.main(
            [
                "evaluate",
                "--scores",
                str(weights),
                "--flags",
                str(flags),
                "-o",
                str(tmp_path / "report.json"),
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert 0.0 <= report["average_precision"] <= 1.0
    assert report["n"] == 40 and report["n_corrupted"] == sum(r["corrupted"] for r in flag_rows)
    assert json.loads((tmp_path / "report.json").read_text()) == report

    # --scout reuses the saved scout: no training, the same weights
    again = tmp_path / "again.csv"
    reuse = ["-q", "weigh", str(noisy), "--n-samples", "30", "-k", "5", "--scout", str(scout_dir)]
    assert cli.main([*reuse, "-o", str(again)]) == 0
    capsys.readouterr()
    import csv

    with open(again, newline="") as f:
        csv_rows = list(csv.DictReader(f))
    assert [float(r["reliability"]) for r in csv_rows] == [r["reliability"] for r in rows]
    # ... and the CRF saved beside it: the same deterministic scores; --no-crf, the scout's alone
    with_crf = [float(r["deterministic_probability"]) for r in csv_rows]
    np.testing.assert_allclose(with_crf, [r["deterministic_probability"] for r in rows], atol=1e-6)
    alone = tmp_path / "alone.jsonl"
    assert cli.main([*reuse, "-o", str(alone), "--no-crf"]) == 0
    capsys.readouterr()
    scout_only = [json.loads(line)["deterministic_probability"] for line in alone.open()]
    assert not np.allclose(scout_only, with_crf, atol=1e-3)
    # an unknown output extension: a clean error, nothing written
    _fails_cleanly(
        capsys, [*reuse, "-o", str(tmp_path / "w.xyz")], "w.xyz", "unknown output extension"
    )
    assert not list(tmp_path.glob("*w.xyz*"))
    # --scout with a directory that keeps no scout: a clean error, naming it
    empty = tmp_path / "empty"
    empty.mkdir()
    _fails_cleanly(
        capsys,
        ["-q", "weigh", str(noisy), "-o", str(again), "--scout", str(empty)],
        f"{empty} is not a saved weigher",
    )

    # train with the weights, score on real dev sentences
    dev = tmp_path / "dev.conll"
    write_dataset(dev, read_conll(CONLLPP_DEV)[:20], task="ner")
    model = tmp_path / "model"
    assert (
        cli.main(
            [
                "-q",
                "train",
                str(noisy),
                "--weights",
                str(weights),
                "--eval",
                str(dev),
                "--epochs",
                "1",
                "-o",
                str(model),
            ]
        )
        == 0
    )
    scored = json.loads(capsys.readouterr().out)
    assert scored["examples"] == 20 and 0.0 <= scored["f1"] <= 1.0
    assert set(scored) == {"examples", "precision", "recall", "f1"}
    assert (model / "scout.json").is_file()
    assert cli.main(["evaluate", "--model", str(model), "--data", str(dev)]) == 0
    assert json.loads(capsys.readouterr().out) == scored


@pytest.mark.slow
def test_weigh_with_an_ensemble_of_scouts(tmp_path):
    data = tmp_path / "data.conll"
    write_dataset(data, read_conll(CONLLPP_TRAIN)[:30], task="ner")
    out = tmp_path / "weights.jsonl"
    # one epoch learns too little; --no-rest-on-crf keeps the scouts' scores (what is tested)
    argv = ["-q", "weigh", str(data), "-o", str(out), "--epochs", "1", "-k", "2"]
    argv.append("--no-rest-on-crf")
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "scout-2").mkdir()  # a member of an earlier, larger ensemble: removed
    assert cli.main([*argv, "--n-samples", "4", "--scouts", "2", "--save-scout", str(saved)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 30 and all(0.0 <= row["score"] <= 1.0 for row in rows)
    assert sorted(p.name for p in saved.iterdir() if p.is_dir()) == ["scout", "scout-1"]
    assert (saved / "crf.npz").is_file() and (saved / "scout-1" / "config.json").is_file()
    # the saved ensemble weighs as it did, both scouts and the CRF loaded
    again = tmp_path / "again.jsonl"
    loaded = ["-q", "weigh", str(data), "-o", str(again), "--scout", str(saved), "-k", "2"]
    loaded.append("--no-rest-on-crf")
    assert cli.main([*loaded, "--n-samples", "4"]) == 0
    reloaded = [json.loads(line)["score"] for line in again.read_text().splitlines()]
    np.testing.assert_allclose(reloaded, [row["score"] for row in rows], atol=2e-3)
    assert cli.main([*argv, "--n-samples", "4", "--scouts", "1"]) == 0
    single = [json.loads(line)["score"] for line in out.read_text().splitlines()]
    assert single != [row["score"] for row in rows]  # the second scout moved the scores


def test_a_reference_of_another_task_or_beside_a_saved_scout_is_refused(tmp_path, capsys):
    data, reference = tmp_path / "data.conll", tmp_path / "reference.tsv"
    write_dataset(data, read_conll(CONLLPP_TRAIN)[:5], task="ner")
    reference.write_text("sentence\tlabel\na fine film\t1\n")
    out = ["-o", str(tmp_path / "w.jsonl")]
    _fails_cleanly(
        capsys,
        ["weigh", str(data), *out, "--reference", str(reference)],
        f"--reference {reference} holds classification data; DATA is ner",
    )
    _fails_cleanly(
        capsys,
        ["weigh", str(data), *out, "--reference", str(data), "--scout", str(tmp_path)],
        "--reference is training data; --scout loads a trained scout instead",
    )


@pytest.mark.slow
def test_weigh_trains_on_the_reference_and_weighs_only_the_data(tmp_path):
    from subregweigh.scout import Scout

    sentences = read_conll(CONLLPP_TRAIN)[:300]
    has_misc = [any("MISC" in tag for tag in ex.label) for ex in sentences]
    batch = [ex for ex, misc in zip(sentences, has_misc) if not misc][:20]
    corpus = [ex for ex, misc in zip(sentences, has_misc) if misc][:20]
    data, reference = tmp_path / "batch.conll", tmp_path / "corpus.conll"
    write_dataset(data, batch, task="ner")
    write_dataset(reference, corpus, task="ner")
    out, saved = tmp_path / "weights.jsonl", tmp_path / "scout"
    argv = ["-q", "weigh", str(data), "-o", str(out), "--reference", str(reference)]
    argv += ["--epochs", "1", "-k", "2", "--n-samples", "4", "--save-scout", str(saved)]
    assert cli.main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["id"] for row in rows] == [ex.id for ex in read_conll(data)]  # the batch only
    # a tag only the reference has: trained on it
    assert "B-MISC" in Scout.load(saved / "scout").labels_
