"""The benchmarks, run end to end at tiny sizes (real data, real MiniLM), and their harness."""

from __future__ import annotations

import importlib
import inspect
import json

import numpy as np
import pytest
import torch

from benchmarks import detection, final_model, harness, index

# 30 sentences, 1 epoch, K=3 of N=6, CrossWeigh 2 folds x 1, 30 test and 30 dev sentences
TINY = [
    "--examples",
    "30",
    "--epochs",
    "1",
    "--n-samples",
    "6",
    "-k",
    "3",
    "--seeds",
    "1",
    "--cw-folds",
    "2",
    "--cw-iterations",
    "1",
    "--test-limit",
    "30",
]


@pytest.mark.parametrize("name", index.benchmark_names())
def test_every_benchmark_imports_and_runs_as_a_module(name):
    """Each is ``python -m benchmarks.NAME``: a module of the package with ``main(argv=None)``."""
    module = importlib.import_module(f"benchmarks.{name}")
    argv = inspect.signature(module.main).parameters["argv"]
    assert argv.default is None
    assert f"python -m benchmarks.{name}" in module.__doc__


def test_the_package_has_the_benchmarks():
    names = index.benchmark_names()
    assert {"detection", "final_model", "scaling", "selftest_projects", "load_test"} <= set(names)
    assert "harness" not in names and "index" not in names


def test_selftest_projects_passes_flags_the_command_line_accepts():
    """The benchmark runs ``subregweigh selftest`` with the end-to-end projects' settings as
    flags; a renamed flag must fail here, not in the benchmark's run."""
    from benchmarks.selftest_projects import flags
    from subregweigh.cli_args import build_parser
    from testbed.projects import ENGINE_ENV, PROJECTS

    for name, _, _, env in PROJECTS:
        shown = flags({**ENGINE_ENV, **env})
        args = build_parser().parse_args(["selftest", f"{name}.json", *shown])
        assert args.epochs == int(env["SRW_EPOCHS"])
        assert (args.n_samples, args.k) == (int(ENGINE_ENV["SRW_N"]), int(ENGINE_ENV["SRW_K"]))
        assert args.n_scouts == int(ENGINE_ENV["SRW_SCOUTS"])
        assert args.freeze_encoder == (env.get("SRW_FREEZE_ENCODER") == "1")
    # switches both ways, as the server reads them; server-only settings have no flag
    env = {"SRW_CRF": "off", "SRW_FREEZE_ENCODER": "true", "SRW_RETRAIN_AFTER": "3"}
    args = build_parser().parse_args(["selftest", "ner.json", *flags(env)])
    assert (args.crf, args.freeze_encoder) == (False, True)
    assert flags({"SRW_CRF": "1", "SRW_FREEZE_ENCODER": "0"}) == []  # the defaults


def test_ranking_metrics():
    quality = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])  # lower = more doubtful
    flags = np.array([True, False, True, False, False, False])
    r = harness.ranking(quality, flags)
    assert r["ap"] == pytest.approx((1 + 2 / 3) / 2)
    assert r["auroc"] == pytest.approx(7 / 8)
    assert r["r_precision"] == 0.5  # the 2 most doubtful hold 1 of the 2 errors
    assert r[f"precision_at_{harness.TOP}"] == pytest.approx(2 / 6)  # fewer than 50: all
    assert harness.precision_at(quality, flags, 3) == pytest.approx(2 / 3)
    # a tie across the cut counts in proportion: the order of the input does not matter
    tied = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    assert harness.precision_at(tied, flags, 2) == pytest.approx(0.5)
    assert harness.precision_at(tied[::-1], flags[::-1], 2) == pytest.approx(0.5)
    assert np.isnan(harness.ranking(quality, np.zeros(6, bool))["r_precision"])
    with pytest.raises(ValueError, match="NaN"):
        harness.ranking([np.nan, 1.0], [True, False])


def test_summaries_tables_and_commands():
    stat = harness.mean_sd([1.0, 2.0, 3.0])
    assert stat == {"mean": 2.0, "sd": 1.0, "n": 3}
    assert harness.pm(stat) == "2.000 ± 1.000" and harness.pm(harness.mean_sd([2])) == "2.000"
    rows = [{"a": 1, "b": 2}, {"a": 3}]
    assert harness.summarize_rows(rows, ["a", "b"]) == {"a": harness.mean_sd([1, 3])}
    assert harness.table(["x", "y"], [[1, "2"]]) == ["| x | y |", "|---|---:|", "| 1 | 2 |"]
    with pytest.raises(ValueError):
        harness.table(["x", "y"], [], align="l")
    assert harness.command("detection", ["--name", "a b"]) == (
        "python -m benchmarks.detection --name 'a b'"
    )
    footer = harness.footer({**harness.stamp("python -m benchmarks.x"), "date": "today"})
    assert footer[0] == "Command: `python -m benchmarks.x`" and footer[-1] == "Date: today."
    assert any(line.startswith("Commit: ") for line in footer)  # the checkout's commit


def test_data_sets_and_noise():
    task, examples = harness.load("conll", 20, seed=3)
    assert task == "ner" and len(examples) == 20
    assert harness.load("conll", 20, seed=3)[1] == examples  # seeded
    noisy, flags = harness.corrupt(examples, task, "sentence", 0.15, seed=3)
    assert len(noisy) == 20 and flags.sum() == 3
    test, original = (
        harness.read_dataset("conllpp-test")[1],
        harness.read_dataset("conll2003-test")[1],
    )
    assert len(test) == len(original) and test[0].words == original[0].words
    baselines = harness.trivial_baselines(noisy, task, seed=0)
    assert set(baselines) == {"random", "length", "entity count", "an entity first"}
    entity_first = baselines["an entity first"]
    has = np.array([any(t != "O" for t in ex.label) for ex in noisy])
    assert entity_first[has].max() < entity_first[~has].min()  # every entity before the rest
    assert set(harness.trivial_baselines(noisy, "classification", 0)) == {"random", "length"}


def test_index_lists_every_result_and_is_current(tmp_path):
    """benchmarks/results/INDEX.md is generated: rerun ``python -m benchmarks.index`` after
    adding, renaming or removing a result."""
    listed = (harness.RESULTS / index.INDEX).read_text()
    assert listed == index.render(), "run python -m benchmarks.index"
    files = index.result_files()
    for path in [*harness.RESULTS.glob("*.json"), *harness.RESULTS.glob("archive/*.json")]:
        if path.name != index.STATUS:
            assert f"`{index.stem_of(path)}`" in listed and index.stem_of(path) in files
    # a result's provenance, its benchmark from the command or else from its name
    (tmp_path / "engine-scaling-gpu.json").write_text(
        json.dumps({"command": "python benchmarks/engine_scaling.py --sizes 1", "date": "d"})
    )
    (tmp_path / "engine-scaling-gpu.md").write_text("")
    (tmp_path / "warm-start-x.md").write_text("")
    assert index.main(["--results", str(tmp_path), "--check"]) == 1
    assert index.main(["--results", str(tmp_path)]) == 0
    assert index.main(["--results", str(tmp_path), "--check"]) == 0
    text = (tmp_path / "INDEX.md").read_text()
    assert "## engine_scaling" in text and "## warm_start" in text
    assert "`python -m benchmarks.engine_scaling --sizes 1`" in text


def test_every_result_has_a_status_and_the_superseded_are_archived():
    """benchmarks/results/STATUS.json: each result current, exploration or superseded (by a
    result that exists), the superseded ones in archive/ unless kept in place for a reason."""
    assert index.status_problems() == [], "fix benchmarks/results/STATUS.json"
    marks = index.statuses()
    current = {stem for stem, mark in marks.items() if mark["status"] == "current"}
    assert {"real-errors-three-scouts", "review-loop-all-crf-context-ensemble3"} <= current
    archived = {index.stem_of(p) for p in (harness.RESULTS / index.ARCHIVE).iterdir()}
    assert archived and all(marks[stem]["status"] == "superseded" for stem in archived)
    # the current results lead the index, each with what it measures
    listed = (harness.RESULTS / index.INDEX).read_text()
    assert listed.index("## Current results") < listed.index("## real_errors")
    assert all(marks[stem].get("note") for stem in current)


def test_a_result_without_a_status_or_out_of_place_is_found(tmp_path):
    (tmp_path / index.ARCHIVE).mkdir()
    for stem in ("new", "old", "kept", "lost"):
        (tmp_path / f"{stem}.json").write_text("{}")
    (tmp_path / index.ARCHIVE / "gone.json").write_text("{}")
    marks = {
        "old": {"status": "superseded", "by": "new"},  # not in archive/
        "kept": {"status": "superseded", "by": "new", "kept": "rerun soon"},
        "lost": {"status": "superseded", "by": "nothing"},
        "gone": {"status": "current"},  # current, but archived
        "ghost": {"status": "exploration"},
    }
    (tmp_path / index.STATUS).write_text(json.dumps({"results": marks}))
    problems = "\n".join(index.status_problems(tmp_path))
    assert "new: no status" in problems and "ghost: in STATUS.json, but no such result" in problems
    assert "old: superseded, so its files belong in archive/" in problems
    assert "lost: superseded by 'nothing', not a result" in problems
    assert "gone: current, so its files belong outside archive/" in problems
    assert "kept:" not in problems
    assert index.main(["--results", str(tmp_path)]) == 1  # written, and the problems said
    assert "`gone`" in (tmp_path / index.INDEX).read_text()


def _ran(benchmark, argv, out, stem: str) -> dict:
    """Run ``benchmark.main(argv)``: it succeeds; the result it wrote, ``out/STEM.json``."""
    assert benchmark.main(argv) == 0
    return json.loads((out / f"{stem}.json").read_text())


def _check_runs(result, n_examples):
    for run in result["runs"]:
        assert set(run["eval"]) == {"test", "dev"}
        for scores in run["eval"].values():
            for metric in ("precision", "recall", "f1"):
                assert 0.0 <= scores[metric] <= 1.0
        assert run["train_seconds"] > 0
        assert 0 < run["n_corrupted"] <= n_examples
        if run["weighting"] == "clean":
            assert run["weights"] is None
        else:
            assert 0.0 <= run["weights"]["ap"] <= 1.0


@pytest.mark.slow
def test_final_model_runs_resumes_and_keeps_finished_runs(tmp_path, monkeypatch):
    args = TINY + ["--out", str(tmp_path), "--name", "fm"]
    assert final_model.main(args + ["--weightings", "vanilla", "agreement"]) == 0

    result = json.loads((tmp_path / "fm.json").read_text())
    assert result["planned_runs"] == 7  # 6 weightings for seed 0, CrossWeigh for seed 0
    assert result["finished_runs"] == 2 and not result["complete"]
    assert [(r["seed"], r["weighting"]) for r in result["runs"]] == [
        (0, "vanilla"),
        (0, "agreement"),
    ]
    assert {(m["seed"], m["weighting"]) for m in result["missing"]} == {
        (0, "probability"),
        (0, "agreement-normalized"),
        (0, "probability-normalized"),
        (0, "clean"),
        (0, "crossweigh"),
    }
    _check_runs(result, 30)
    vanilla, agreement = result["runs"]
    # unit weights rank nothing: their AP is the share of corrupted sentences
    assert vanilla["weights"]["ap"] == pytest.approx(vanilla["base_rate"])
    assert vanilla["weights"]["mean_weight_clean"] == 1.0
    assert agreement["weighing_seconds"] > 0
    assert set(result["summary"]) == {"vanilla", "agreement"}
    assert result["summary"]["agreement"]["delta_test_f1"]["mean"] == pytest.approx(
        agreement["eval"]["test"]["f1"] - vanilla["eval"]["test"]["f1"]
    )
    weights = json.loads((tmp_path / "fm.weights.json").read_text())["0"]
    for name in ("agreement", "probability"):  # one weighing gives both
        assert len(weights[name]) == 30
        assert all(1 / 3 - 1e-6 <= w <= 1.0 for w in weights[name])
    markdown = (tmp_path / "fm.md").read_text()
    assert "**Incomplete**: 2 of 7 (seed, weighting) runs" in markdown
    assert "| vanilla (w = 1) | 0 |" in markdown
    assert "--weightings vanilla agreement" in markdown

    # an existing result is neither replaced by accident nor resumed with other settings
    with pytest.raises(SystemExit, match="--resume"):
        final_model.main(args)
    with pytest.raises(SystemExit, match="examples"):
        final_model.main([*args, "--resume", "--examples", "31"])

    # resuming runs only what is missing, from the stored weights: no scout, no weighing again
    def no_weighing(*a, **k):
        raise AssertionError("resume weighed again")

    monkeypatch.setattr(final_model, "SubRegWeigh", no_weighing)
    resumed = _ran(final_model, [*args, "--resume"], tmp_path, "fm")
    assert resumed["complete"] and resumed["finished_runs"] == 7 and not resumed["missing"]
    assert resumed["runs"][:2] == result["runs"]
    assert [r["weighting"] for r in resumed["runs"][2:]] == [
        "probability",
        "agreement-normalized",
        "probability-normalized",
        "clean",
        "crossweigh",
    ]
    normalized = resumed["runs"][3]["weights"]
    assert normalized["ap"] == pytest.approx(agreement["weights"]["ap"])  # same ranking
    n_corrupted = resumed["runs"][3]["n_corrupted"]
    overall = (30 - n_corrupted) * normalized["mean_weight_clean"]
    overall += n_corrupted * normalized["mean_weight_corrupted"]
    assert overall / 30 == pytest.approx(1.0)  # divided by its mean
    assert len(resumed["commands"]) == 2 and resumed["commands"][1].endswith("--resume")
    assert set(resumed["weighings"]["0"]) == {"srw", "crossweigh"}
    _check_runs(resumed, 30)
    crossweigh = resumed["runs"][-1]
    assert crossweigh["weighing_seconds"] == resumed["weighings"]["0"]["crossweigh"]["seconds"]
    markdown = (tmp_path / "fm.md").read_text()
    assert "Incomplete" not in markdown
    for label in final_model.LABELS.values():
        assert f"| {label} | 0 |" in markdown


DETECTION_TINY = ["--sizes", "24", "--epochs", "1", "--n-samples", "6", "-k", "3", "--folds", "2"]


@pytest.mark.slow
def test_detection_resume_keeps_finished_seeds(tmp_path, monkeypatch):
    args = DETECTION_TINY + ["--out", str(tmp_path), "--name", "det"]
    first = _ran(detection, args + ["--seeds", "1"], tmp_path, "det")
    assert first["complete"] and first["summary"]["24"]["methods"]["random"]
    (run,) = first["runs"]
    assert run["cleanlab_vs_min_gold_max_diff"] < 1e-5  # cleanlab's default: the lowest p(gold)
    assert run["methods"]["length"]["ap"] >= 0 and "Command:" in (tmp_path / "det.md").read_text()
    assert {"precision_at_50", "r_precision"} <= set(run["methods"]["length"])
    assert (
        "| score | AP | AUROC | precision top 50 | R-precision |"
        in (tmp_path / "det.md").read_text()
    )

    # other settings: refused; same settings: seed 0 kept as it was, only seed 1 is run
    with pytest.raises(ValueError, match="other settings"):
        detection.main([*args, "--seeds", "2", "--resume", "-k", "4"])
    real_run_one = detection.run_one
    seeds_run = []

    def counting_run_one(a, size, seed):
        seeds_run.append(seed)
        return real_run_one(a, size, seed)

    monkeypatch.setattr(detection, "run_one", counting_run_one)
    resumed = _ran(detection, [*args, "--seeds", "2", "--resume"], tmp_path, "det")
    assert seeds_run == [1] and resumed["complete"]
    assert resumed["runs"][0] == run and resumed["runs"][1]["seed"] == 1
    assert resumed["summary"]["24"]["methods"]["random"]["ap"]["n"] == 2


@pytest.mark.slow
def test_detection_curve_runs_costly_scores_up_to_a_size(tmp_path):
    args = [*DETECTION_TINY[2:], "--sizes", "16", "24", "--costly-up-to", "16", "--seeds", "1"]
    result = _ran(detection, [*args, "--out", str(tmp_path), "--name", "curve"], tmp_path, "curve")
    assert "cleanlab OOF" in result["summary"]["16"]["methods"]
    assert "cleanlab OOF" not in result["summary"]["24"]["methods"]
    assert "agreement c/K" in result["summary"]["24"]["methods"]
    assert all(run["machine"] for run in result["runs"]) and (tmp_path / "curve.png").stat().st_size
    assert "up to 16 only" in (tmp_path / "curve.md").read_text()


def test_detection_says_which_runs_ran_where():
    runs = [{"size": 100, "seed": 0, "machine": "gpu box"}, {"size": 100, "seed": 1}]
    runs[1]["machine"] = "cpu box"
    lines = detection.machines({"runs": runs})
    assert "- gpu box: 100/0" in lines and "- cpu box: 100/1" in lines
    assert detection.machines({"runs": runs[:1]}) == []  # one machine: the footer says it


@pytest.mark.slow
def test_engine_scaling_times_each_phase(tmp_path):
    from benchmarks import engine_scaling

    args = ["--sizes", "24", "--epochs", "1", "-k", "3", "--n-samples", "6", "--n-jobs", "1"]
    (row,) = _ran(
        engine_scaling, [*args, "--out", str(tmp_path), "--name", "eng"], tmp_path, "eng"
    )["runs"]
    assert row["size"] == 24 and all(row["seconds"][p] > 0 for p in engine_scaling.PHASES)
    assert row["candidates"] >= 24 and 0 <= row["mean_reliability"] <= 1
    assert "| 24 |" in (tmp_path / "eng.md").read_text()
    # resuming with other settings is refused rather than mixed into one table
    with pytest.raises(SystemExit, match="other settings"):
        engine_scaling.main([*args[:-1], "2", "--out", str(tmp_path), "--name", "eng", "--resume"])


@pytest.mark.slow
def test_training_step_times_each_variant_and_profiles_one_fit(tmp_path):
    from benchmarks import training_step

    args = ["--sentences", "24", "--repeats", "1", "--out", str(tmp_path), "--name", "ts"]
    result = _ran(training_step, args, tmp_path, "ts")
    assert [r["variant"] for r in result["runs"]] == ["for-loop", "fused", "fused-bfloat16"]
    assert all(r["wall"] > 0 and 0 < r["optimizer_step"] < r["wall"] for r in result["runs"])
    (shares,) = result["op_shares"].values()
    assert shares["matrix products"] > 0
    assert abs(sum(shares.values()) - 1) < 1e-9
    # the wrapper is gone afterwards: the scout's own optimizer is torch's again
    assert torch.optim.AdamW.__name__ == "AdamW"
    markdown = (tmp_path / "ts.md").read_text()
    assert "| fused |" in markdown
    assert f"Speed check: {result['matmul_gflops']} GFLOP/s" in markdown


@pytest.mark.slow
def test_inference_weighs_the_same_candidates_in_each_variant(tmp_path):
    from benchmarks import inference

    args = ["--examples", "20", "--n-samples", "6", "-k", "3", "--threads", "1"]
    args += ["--batch-sizes", "16", "--out", str(tmp_path), "--name", "inf"]
    rows = _ran(inference, args, tmp_path, "inf")["rows"]
    assert [r["variant"] for r in rows] == ["float32", "int8", "bfloat16", "float32"]
    reference, int8, bf16, batch16 = rows
    assert reference["max_abs_diff"] == 0 and reference["spearman"] == 1
    assert int8["max_abs_diff"] > 0 and bf16["max_abs_diff"] > 0  # other arithmetic
    assert batch16["batch_size"] == 16 and batch16["max_abs_diff"] < 1e-4  # the same arithmetic
    assert all(r["candidates_per_second"] > 0 for r in rows)


@pytest.mark.slow
def test_warm_start_compares_three_scouts_on_the_same_candidates(tmp_path):
    from benchmarks import warm_start

    args = ["--examples", "30", "--steps", "1", "--change", "5", "--seeds", "1", "--epochs", "1"]
    args += ["--n-samples", "6", "-k", "3", "--warm-learning-rate", "3e-5", "--out", str(tmp_path)]
    result = _ran(warm_start, args, tmp_path, "warm-start-conll")
    (run,) = result["runs"]
    assert set(run["scores"]) == {"full", "warm", "stale"}
    full = run["scores"]["full"]["probability"]["ap"]
    assert result["summary"]["full"]["probability_ap_vs_full"]["mean"] == 0
    assert result["summary"]["warm"]["probability_ap_vs_full"]["mean"] == pytest.approx(
        run["scores"]["warm"]["probability"]["ap"] - full
    )
    assert run["train"]["warm"]["wall_seconds"] > 0 and run["train"]["full"]["cpu_seconds"] > 0
    assert "at peak learning rate 3e-05" in (tmp_path / "warm-start-conll.md").read_text()


@pytest.mark.slow
def test_ablation_rows_share_one_scout(tmp_path):
    from benchmarks import ablation

    args = ["--examples", "24", "--epochs", "1", "--n-samples", "8", "-k", "3", "--seeds", "1"]
    args += ["--methods", "random", "kmeans", "--ps", "0", "0.1", "--out", str(tmp_path)]
    result = _ran(ablation, args, tmp_path, "ablation-conll-sentence")
    variants = result["runs"][0]["variants"]
    assert set(variants) == {"random p=0.0", "kmeans p=0.0", "random p=0.1", "kmeans p=0.1"}
    for name, row in variants.items():
        assert 0 <= row["probability"]["ap"] <= 1 and row["weigh_seconds"] > 0
    # p=0 reproduces the tokenizer: one distinct candidate, the deterministic one, every time
    assert variants["kmeans p=0.0"]["distinct_per_example"] == 1.0
    assert variants["kmeans p=0.0"]["deterministic_share"] == 1.0
    assert variants["kmeans p=0.1"]["distinct_per_example"] > 1.0
    assert "| kmeans p=0.1 |" in (tmp_path / "ablation-conll-sentence.md").read_text()


@pytest.mark.slow
def test_scaling_times_training_through_label_studio(tmp_path):
    """benchmarks.scaling on a 20-task project: Start Training, then a retrain that 2 edits
    in Label Studio start through its webhooks, both timed to the early scores in Label Studio
    (the CRF's alone: a NER project this small trains one scout, whose version with the CRF's
    is the full one) and to the full training's; the first edit is also timed until the
    backend rescored it and until its refresh served."""
    from testbed.servers import require_label_studio

    require_label_studio()
    from benchmarks import scaling

    tiny = ["--sizes", "20", "--retrain-at", "20", "--changes", "2", "--epochs", "1", "-k", "2"]
    assert scaling.main(tiny + ["--n-samples", "4", "--out", str(tmp_path)]) == 0

    result = json.loads((tmp_path / "scaling.json").read_text())
    assert [(r["size"], r["kind"]) for r in result["runs"]] == [
        (20, scaling.FIRST),
        (20, scaling.RETRAIN),
    ]
    first, retrain = result["runs"]
    assert first["version"] != retrain["version"]
    for run in result["runs"]:
        assert set(run["phase_seconds"]) == set(scaling.PHASES)
        to_scores = sum(run["phase_seconds"][p] for p in scaling.SCORED)
        assert run["refined_seconds"] >= to_scores and run["overhead_seconds"] >= 0
        assert run["end_to_end_seconds"] <= run["refined_seconds"]
        # a first training: the CRF's scores, then the one scout's beside them, the full
        # version; a retrain publishes no early version (issue 61): the last one serves
        early = [scaling._early_what(e["what"]) for e in run["early_scores"]]
        if run["kind"] == scaling.RETRAIN:
            assert early == []
        else:
            assert early == ["CRF"]
            assert run["phase_seconds"]["early"] > 0
            (crf_s,) = (e["seconds"] for e in run["early_scores"])
            assert 0 < crf_s < run["refined_seconds"]
            assert run["early_passes"] == 0.0  # what made the first scores: the CRF alone
        assert run["all_done_seconds"] >= sum(run["phase_seconds"].values())
        # the K candidates were weighed, after the scores (the end-to-end times are rounded to
        # 10 ms and polled every 0.5 s, so a K pass this small can end within the same poll)
        assert run["phase_seconds"]["weigh"] > 0
        assert run["all_done_seconds"] >= run["refined_seconds"]
        assert run["peak_rss_mb"] > 100 and run["cpu_seconds"] > 0 and run["passes"] == 1
        assert run["matmul_gflops"] > 0  # the machine's speed at the row's start
    assert result["matmul_gflops"] > 0
    assert (tmp_path / "scaling.png").stat().st_size > 0
    table = (tmp_path / "scaling.md").read_text()
    assert "| 20 (+2 edits) | retrain after changes |" in table
    assert table.count(" | CRF ") == 1  # the first training's early scores alone
    (rescored,) = retrain["rescore_seconds"]  # the edit before the one that retrains
    assert 0 < rescored < retrain["end_to_end_seconds"] + 120
    (refreshed,) = retrain["refresh_seconds"]  # and its refresh: a version of the whole project
    assert rescored <= refreshed < 120
    assert "over 1 edits" in table and "(1 of 1 edits refreshed)" in table
    # the refresh's own phases, from the backend's status: the tasks kept, not read again
    phases = retrain["refresh_phase_seconds"]
    assert set(phases) == {"fetch", "crf", "score", "publish", "refresh"}
    assert 0 < phases["crf"] < phases["refresh"] <= refreshed
    assert "The refresh's own phases, median over those edits: fetch " in table


@pytest.mark.slow
def test_breakdown_times_each_piece_of_a_training(tmp_path):
    from benchmarks import breakdown

    assert breakdown.main(["--sentences", "40", "--out", str(tmp_path), "--name", "bd"]) == 0
    rows = json.loads((tmp_path / "bd.json").read_text())["rows"]
    assert {r["piece"] for r in rows} == {"CRF", "scout", "K candidates", "refresh"}
    assert all(r["seconds"] >= 0 for r in rows) and len(rows) == 12
    text = (tmp_path / "bd.md").read_text()
    assert "| scout | training, 3 epochs, 9 steps |" in text
    assert "| CRF | CRFsuite training, at most 100 iterations (the fit less its vectors) |" in text


def test_stage_quality_reads_each_version_s_ap_from_the_current_results():
    from benchmarks import stage_quality

    rows = stage_quality.stages()
    small = json.loads((harness.RESULTS / f"{stage_quality.SMALL}.json").read_text())["summary"]
    full = next(r for r in rows if (r["size"], r["stage"]) == (1000, "full"))
    assert full["ap"] == small["1000"]["methods"]["deterministic"]["ap"]
    assert all(r["seconds"] is None or r["seconds"] > 0 for r in rows)


@pytest.mark.slow
def test_fetch_times_both_reads_of_a_project(tmp_path):
    """benchmarks.fetch on a 12-task project: the export and the task list read the same
    tasks (it asserts so), each timed."""
    from testbed.servers import require_label_studio

    require_label_studio()
    from benchmarks import fetch

    (run,) = _ran(
        fetch, ["--sizes", "12", "--repeats", "1", "--out", str(tmp_path)], tmp_path, "fetch"
    )["runs"]
    assert run["size"] == 12
    assert all(
        len(run["seconds"][read]) == 1 and run["seconds"][read][0] > 0 for read in fetch.READS
    )
    assert "| 12 |" in (tmp_path / "fetch.md").read_text()


@pytest.mark.slow
def test_real_errors_ranks_every_score_against_conllpp(tmp_path):
    from benchmarks import real_errors
    from subregweigh.options import BY_NAME

    original, corrected, flags = real_errors.load_pair()
    assert len(original) == 3453 and flags.sum() == 186
    argv = ["--sizes", "40", "--seeds", "1", "--epochs", "1", "--n-samples", "6", "-k", "3"]
    argv += ["--folds", "2", "--ensemble", "2", "--out", str(tmp_path), "--threads", "1"]
    argv += ["--memory", "1"]
    result = _ran(real_errors, argv, tmp_path, "real-errors-40-scouts2")
    (run,) = result["runs"]
    picked = real_errors.draw("40", 0, len(original))
    assert run["n"] == 40 and run["n_errors"] == int(flags[picked].sum())
    methods = run["methods"]
    assert set(methods) == {
        *real_errors.PRODUCT,  # of the two scouts with the CRF
        "one scout (SRW_SCOUTS=1)",
        "2 scouts alone (no CRF)",
        "CRF alone",
        "lowest word, scouts + CRF",
        "deterministic, memory 1",  # --memory: the same scouts and CRF with the memory
        "CRF alone, memory 1",
        real_errors.policy_row(not BY_NAME["rest_on_crf"].default),  # the other setting
        *real_errors.BASELINES,
        *real_errors.MODEL_FREE,
    }
    for name, m in methods.items():
        assert set(m) >= {"ap", "auroc", "precision_at_50", "r_precision", "recall_missing"}, name
    # cleanlab's in-sample score is the lowest p(gold), computed by cleanlab's own code
    assert run["cleanlab_vs_min_gold_max_diff"] < 1e-5
    assert 0 <= run["learned_recall"] <= 1 and isinstance(run["rests_on_crf"], bool)
    # the CRF trains first and the first scout's scores come before the ensemble's
    seconds = {name: methods[name]["seconds"] for name in methods}
    assert 0 < seconds["CRF alone"] < seconds["one scout (SRW_SCOUTS=1)"]
    assert seconds["one scout (SRW_SCOUTS=1)"] < seconds["deterministic"]
    assert methods["one scout (SRW_SCOUTS=1)"]["ap"] != methods["deterministic"]["ap"]
    page = (tmp_path / "real-errors-40-scouts2.md").read_text()
    assert "deterministic (product)" in page and "consistency (model-free)" in page
    assert "2 scouts (seeds s, s+1000" in page


def test_the_articles_are_conll_test_documents_whole():
    """CoNLL-2003 test's 231 documents, each one task of its sentences in order; an article is
    erroneous when a sentence of it is (its first -DOCSTART- moved to the end changes none)."""
    from benchmarks import real_errors, real_errors_articles

    original, corrected, flags = real_errors_articles.load_pair()
    sentences, _, sentence_flags = real_errors.load_pair()
    assert len(original) == 231 and int(flags.sum()) == 95
    assert sum(len(a.words) for a in original) == sum(len(s.words) for s in sentences)
    groups = real_errors_articles.articles(sentences)
    assert [len(g) for g in groups] == [
        len(g) for g in real_errors_articles.articles(harness.read_dataset("conllpp-test")[1])
    ]
    assert [i for g in groups for i in g] == list(range(len(sentences)))  # in order, no gap
    first = groups[0]
    assert original[0].words == tuple(w for i in first for w in sentences[i].words)
    assert flags[0] == sentence_flags[first].any()
    assert max(len(a.words) for a in original) == 797  # past the encoder's window


def test_length_check_compares_the_shortest_third_with_the_longest():
    from benchmarks.real_errors_articles import FLAG_BELOW, length_check
    from subregweigh.example import Example

    examples = [Example(str(n), ("w",) * n, ("O",) * n) for n in range(1, 7)]  # 1..6 words
    flags = np.array([True, False, False, False, True, True])
    quality = np.array([0.1, 0.9, 0.8, 0.7, 0.2, 0.6])
    check = length_check(examples, {"deterministic": (quality, 0.0)}, flags)
    short, long = check["shortest third"], check["longest third"]
    assert (short["n"], short["words"], long["words"]) == (2, 1.5, 5.5)
    assert (short["base_rate"], long["base_rate"]) == (0.5, 1.0)
    assert short["scores"]["deterministic"]["ap"] == 1.0
    assert np.isnan(long["scores"]["deterministic"]["ap"])  # only errors: no ranking
    assert FLAG_BELOW == 0.5 and long["scores"]["deterministic"]["flag_rate"] == 0.5
    assert short["scores"]["deterministic"]["flag_precision"] == 1.0


@pytest.mark.slow
def test_real_errors_articles_ranks_conll_articles_and_checks_length(tmp_path):
    """The article-level benchmark at a tiny size: 12 articles, one epoch, one scout."""
    from benchmarks import real_errors, real_errors_articles

    argv = ["--sizes", "12", "--seeds", "1", "--epochs", "1", "--n-samples", "6", "-k", "3"]
    argv += ["--out", str(tmp_path), "--threads", "1"]
    result = _ran(real_errors_articles, argv, tmp_path, "real-errors-articles-12")
    (run,) = result["runs"]
    _, _, flags = real_errors_articles.load_pair()
    picked = real_errors.draw("12", 0, len(flags))
    assert run["n"] == 12 and run["n_errors"] == int(flags[picked].sum())
    assert run["n_scouts"] == 1  # the product's number for a dozen tasks
    assert {"deterministic", "cleanlab in-sample", "random", "length", "entity count"} <= set(
        run["methods"]
    )
    assert "cleanlab OOF" not in run["methods"]  # --folds 0 by default
    check = run["length_check"]
    assert check["shortest third"]["n"] == check["longest third"]["n"] == 4
    assert check["shortest third"]["words"] < check["longest third"]["words"]
    for third in check.values():
        assert set(third["scores"]) == {
            *real_errors_articles.LENGTH_CHECKED,
            *real_errors_articles.LENGTH_BASELINES,
        }
        assert 0 <= third["scores"]["deterministic"]["flag_rate"] <= 1
        assert set(third["scores"]["length"]) == {"ap"}  # length ranks; it flags nothing
    page = (tmp_path / "real-errors-articles-12.md").read_text()
    assert "Length check" in page and "Sentence level (real-errors-three-scouts" in page


def test_review_loop_moves_the_same_convention_slip_up():
    from benchmarks.review_loop import found_after, reads_to_find, review
    from subregweigh.example import Example

    def ex(i, words, tags):
        return Example(str(i), tuple(words.split()), tuple(tags.split()))

    original = [
        ex(0, "Victoria won", "B-LOC O"),  # a slip, fixed first
        ex(1, "rain fell", "O O"),
        ex(2, "snow fell", "O O"),
        ex(3, "Victoria lost", "B-LOC O"),  # the same slip, scored as sure
    ]
    corrected = [
        ex(0, "Victoria won", "B-ORG O"),
        *original[1:3],
        ex(3, "Victoria lost", "B-ORG O"),
    ]
    flags = np.array([True, False, False, True])
    quality = np.array([0.1, 0.3, 0.4, 0.5])
    static = review(quality, flags, original, corrected, 1, "static")
    propagated = review(quality, flags, original, corrected, 1, "propagate", boost=0.5)
    assert [r["found"] for r in static] == [1, 1, 1, 2]
    assert [r["found"] for r in propagated] == [1, 2, 2, 2]  # 0.5 * 0.5 = 0.25 < 0.3
    assert found_after(propagated, 2) == 2 and found_after(static, 2) == 1
    # counted within a round, in its order: rounds of 4 read in one go
    whole = review(quality, flags, original, corrected, 4, "static")
    assert [found_after(whole, n) for n in (1, 2, 3, 4)] == [1, 1, 1, 2]
    assert reads_to_find(whole, 2) == 4 and reads_to_find(whole, 1) == 1
    assert reads_to_find(propagated, 2) == 2


def test_review_loop_retrains_on_the_annotations_as_fixed():
    from benchmarks.review_loop import review
    from subregweigh.example import Example

    def ex(i, tags):
        return Example(str(i), ("Victoria", "won"), tuple(tags.split()))

    original = [ex(i, "B-LOC O") for i in range(6)]
    corrected = [ex(i, "B-ORG O") if i in (0, 4) else original[i] for i in range(6)]
    flags = np.array([False if o == c else True for o, c in zip(original, corrected)])
    quality = np.array([0.1, 0.2, 0.3, 0.4, 0.9, 0.5])
    seen = []

    def rescore(now, reviewed):  # the retrained scout's scores: it doubts sentence 4 now
        seen.append([e.label[0] for e in now])
        assert 0 < len(set(reviewed)) == len(reviewed) < len(now)  # the sentences read so far
        return np.array([0.9, 0.9, 0.8, 0.7, 0.1, 0.6])

    kw = {"rescore": rescore, "retrain_every": 2, "retrain_until": 5, "boost": 0.5}
    static = review(quality, flags, original, corrected, 1, "static", **kw)
    assert [r["found"] for r in static] == [1, 1, 1, 1, 1, 2] and not seen
    retrained = review(quality, flags, original, corrected, 1, "retrain", **kw)
    assert [r["found"] for r in retrained] == [1, 1, 2, 2, 2, 2]  # read 0, 1, then 4
    # after round 2 (sentence 0 fixed) and round 4 (0 and 4 fixed); not after round 6: 6 >= 5
    assert seen == [
        ["B-ORG"] + ["B-LOC"] * 5,
        ["B-ORG", "B-LOC", "B-LOC", "B-LOC", "B-ORG", "B-LOC"],
    ]

    # refit-crf: the same rounds, by the CRF's refit; the scout is not retrained
    def no_scout(now, reviewed):
        raise AssertionError("refit-crf retrained the scout")

    seen.clear()
    refit = {**kw, "rescore": no_scout, "refit": rescore, "refit_every": 2, "refit_until": 5}
    refitted = review(quality, flags, original, corrected, 1, "refit-crf", **refit)
    assert [r["found"] for r in refitted] == [1, 1, 2, 2, 2, 2] and len(seen) == 2
    # the refresh every round, the retrain every other: a refit between retrains mixes with
    # the last retrain's scores; here each round's refit sees the fixes as they stand
    calls = []
    both = {**kw, "refit": lambda *a: calls.append("refit") or rescore(*a), "refit_every": 1}
    both["rescore"] = lambda *a: calls.append("retrain") or rescore(*a)
    policy = "propagate+refit-crf+retrain"
    review(quality, flags, original, corrected, 1, policy, **both, refit_until=5)
    assert calls == ["refit", "retrain", "refit", "retrain"]  # none once 5 are read


def test_review_loop_retrain_weight_counts_the_reviewed_sentences_more():
    from benchmarks.review_loop import parse_args, reviewed_weights

    assert reviewed_weights(5, [1, 3], 1.0) is None  # the backend's training: no weights
    assert reviewed_weights(5, [1, 3], 3.0).tolist() == [1, 3, 1, 3, 1]
    assert reviewed_weights(3, [], 3.0).tolist() == [1, 1, 1]
    assert parse_args([]).retrain_weight == 1.0
    assert parse_args(["--retrain-weight", "3"]).retrain_weight == 3.0


@pytest.mark.slow
def test_review_loop_runs_end_to_end(tmp_path):
    from benchmarks import review_loop

    argv = ["--size", "40", "--seeds", "1", "--epochs", "1", "--batch", "5"]
    argv += ["--out", str(tmp_path), "--threads", "1", "--cache", str(tmp_path / "cache")]
    result = _ran(review_loop, argv, tmp_path, "review-loop-40")
    (run,) = result["runs"]
    assert len(list((tmp_path / "cache").glob("scout-*.npz"))) == 1
    assert review_loop.main([*argv, "--name", "again"]) == 0  # from the cache: the same scout
    (again,) = json.loads((tmp_path / "again.json").read_text())["runs"]
    assert again["static"]["curve"] == run["static"]["curve"]
    assert again["scout_seconds"] == run["scout_seconds"]
    assert review_loop.main([*argv, "--ensemble", "2", "--name", "pair"]) == 0
    assert len(list((tmp_path / "cache").glob("scout-*.npz"))) == 2  # the first one reused
    (pair,) = json.loads((tmp_path / "pair.json").read_text())["runs"]
    assert pair["scout_seconds"] > run["scout_seconds"]  # the two scouts' trainings
    assert "averaged over 2 scouts" in (tmp_path / "pair.md").read_text()
    again = ["--policies", *review_loop.POLICIES, "--retrain-every", "4", "--retrain-until", "40"]
    (retrained,) = _ran(review_loop, [*argv, *again, "--name", "re"], tmp_path, "re")["runs"]
    assert set(review_loop.POLICIES) <= set(retrained)
    first, second = _ran(
        review_loop, [*argv, *again, "--name", "re", "--seeds", "2", "--resume"], tmp_path, "re"
    )["runs"]
    assert first == retrained and second["seed"] == 1  # the finished seed kept, not rerun
    # a round that retrains a scout costs seconds, a static one microseconds
    assert retrained["retrain"]["round_seconds"] > 100 * retrained["static"]["round_seconds"]
    for policy in [*review_loop.CHEAP, "retrain"]:
        curve = (retrained if policy == "retrain" else run)[policy]["curve"]
        assert curve[-1] == [40, run["n_errors"]]  # every sentence read, every error found
        assert all(a[1] <= b[1] for a, b in zip(curve, curve[1:]))
    assert (tmp_path / "review-loop-40.png").stat().st_size > 0


def test_the_tweets_real_errors_are_the_crowd_against_the_experts():
    """benchmarks.tweets on the Broad Twitter Corpus B in ../shared/data/btc: the 788 tweets
    with every type judged; slot 0's worker differs from the experts on 169, slot 1's on 126;
    320 hold an entity (the counts of SOURCES.md there)."""
    from benchmarks.tweets import load_pair, worker_tags

    assert worker_tags(4, {"PER": {0, 1}, "LOC": {3}, "ORG": {1}}) == (
        "B-PER",
        "I-PER",
        "O",
        "B-LOC",
    )
    for slot, errors in ((0, 169), (1, 126)):
        annotated, corrected, flags = load_pair(slot)
        assert len(annotated) == len(corrected) == 788 and int(flags.sum()) == errors
        assert all(a.words == c.words for a, c in zip(annotated, corrected))
    assert sum(any(t != "O" for t in ex.label) for ex in corrected) == 320


@pytest.mark.slow
def test_selftest_real_puts_the_self_test_beside_the_real_errors(tmp_path):
    """benchmarks.selftest_real on one small draw of the crowd's tweets: the real errors' AP
    and the self-test's, each with its base rate; the mix of real error kinds it writes is the
    one subregweigh.noise.ANNOTATOR_MIX averages (its tweets half: both slots' changes)."""
    from benchmarks import selftest_real
    from subregweigh.noise import ANNOTATOR_MIX

    argv = ["--data", "tweets-0", "tweets-1", "--sizes", "40", "--seeds", "1", "--epochs", "1"]
    argv += ["--noises", "annotators", "--out", str(tmp_path), "--threads", "1"]
    result = _ran(selftest_real, argv, tmp_path, "selftest-real")
    assert [(r["data"], r["size"]) for r in result["runs"]] == [("tweets-0", 40), ("tweets-1", 40)]
    for run in result["runs"]:
        real, tested = run["methods"]["real"], run["methods"]["self-test, annotators"]
        assert 0 < real["base_rate"] < 1 and 0 <= real["ap"] <= 1
        assert tested["base_rate"] == pytest.approx(0.1) and 0 <= tested["ap"] <= 1
    mix = result["error_mix"]
    counts = {
        k: mix["tweets-0"]["counts"][k] + mix["tweets-1"]["counts"][k]
        for k in mix["tweets-0"]["counts"]
    }
    tweets = {k: v / sum(counts.values()) for k, v in counts.items()}
    conll = selftest_real.error_mix("conllpp")["shares"]
    kinds = {"drop": "missing", "shift": "boundary", "retype": "type", "add": "spurious"}
    for kind, change in kinds.items():
        assert ANNOTATOR_MIX[kind] == pytest.approx((tweets[change] + conll[change]) / 2, abs=5e-4)
    assert "The mix of real errors" in (tmp_path / "selftest-real.md").read_text()


def test_version_scale_maps_a_version_s_quantile_to_the_threshold_and_keeps_its_order():
    from benchmarks.version_scale import THRESHOLD, quantile_map

    score = np.array([0.2, 0.3, 0.3, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.99])
    mapped = quantile_map(score, 0.3)
    # strictly increasing through (0, 0), (t, 0.5), (1, 1): the order and its ties stay
    assert np.array_equal(np.argsort(mapped, kind="stable"), np.argsort(score, kind="stable"))
    assert mapped[1] == mapped[2] and (np.diff(mapped[2:]) > 0).all()
    assert 0.0 <= mapped.min() and mapped.max() <= 1.0
    assert quantile_map(np.array([0.0, 1.0]), 0.5).tolist() == [0.0, 1.0]
    # the 0.3-quantile (0.51, between the third and the fourth) goes to 0.5: three stay under
    assert mapped[1] == pytest.approx(0.3 / 0.51 * THRESHOLD)
    assert mapped[3] == pytest.approx(THRESHOLD + (0.6 - 0.51) / 0.49 * THRESHOLD)
    assert (mapped < THRESHOLD).sum() == 3
    assert (quantile_map(score, 0.5) < THRESHOLD).sum() == 5
    # q at the ends: nothing under 0.5, or all but the highest
    assert (quantile_map(score, 0.0) < THRESHOLD).sum() == 0
    assert (quantile_map(score, 1.0) < THRESHOLD).sum() == 9


def test_version_scale_measures_agreement_and_its_chance_level():
    from benchmarks.version_scale import chance_jaccard, disagreement, jaccard, lowest
    from subregweigh.example import Example

    assert jaccard({1, 2, 3}, {2, 3, 4}) == 0.5 and jaccard(set(), set()) == 1.0
    # two random sets of a tenth of 300 share about 3 of their 57
    assert chance_jaccard(30, 30, 300) == pytest.approx(3 / 57)
    assert chance_jaccard(300, 300, 300) == 1.0 and chance_jaccard(0, 0, 300) == 1.0
    assert lowest(np.array([0.5, 0.1, 0.1, 0.9]), 2).tolist() == [1, 2]
    examples = [Example("a", ("x", "y"), ("B-PER", "O")), Example("b", ("z",), ("O",))]
    assert disagreement(examples, [("B-PER", "O"), ("B-LOC",)]) == 0.5


@pytest.mark.slow
def test_version_scale_trains_three_versions_and_keeps_the_ap(tmp_path):
    """The version benchmark at a tiny size: 40 CoNLL sentences, one epoch, one seed; the AP
    of every calibration is the raw one (the benchmark asserts it too)."""
    from benchmarks import version_scale
    from benchmarks.real_errors import load_pair

    argv = ["--data", "conllpp", "--size", "40", "--seeds", "1", "--epochs", "1"]
    argv += ["--out", str(tmp_path), "--threads", "1"]
    result = _ran(version_scale, argv, tmp_path, "version-scale")
    (run,) = result["runs"]
    _, _, flags = load_pair("conllpp")
    picked = harness.sample_indices(len(flags), 40, 0)
    assert (run["n"], run["n_grown"]) == (40, 44)
    assert run["base_rate"] == pytest.approx(flags[picked].mean())
    calibrations = run["calibrations"]
    assert set(calibrations) == set(version_scale.CALIBRATIONS)
    aps = {m["ap"] for m in calibrations.values()}
    assert len(aps) == 1  # a monotone map per version: the same ranking
    # the rank overlaps do not depend on the map; a quantile's share under 0.5 is about its q
    assert len({m["overlap_grown"] for m in calibrations.values()}) == 1
    estimate = calibrations["estimate"]
    assert abs(estimate["share_A"] - estimate["q_A"]) <= 1 / 40 + 1e-9
    assert set(run["seconds"]) == set(version_scale.VERSIONS)
    assert "| estimate |" in (tmp_path / "version-scale.md").read_text()
