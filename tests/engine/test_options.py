"""The engine's options, declared once (subregweigh.options): the CLI's flags generated from them,
a settings table's view of them, and the weigher they build (subregweigh.build)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from subregweigh.cli_args import build_parser
from subregweigh.options import (
    BY_NAME,
    OPTIONS,
    SCOUT_OPTIONS,
    WEIGH_OPTIONS,
    Option,
    add_arguments,
    option_values,
)


def test_the_options_load_nothing_heavy():
    """The CLI's --help and the backend's settings import them before anything heavy loads."""
    code = (
        "import sys, subregweigh.options, subregweigh.cli_args; "
        "print(sorted(m for m in ('torch', 'numpy', 'transformers', 'sklearn') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_option_is_declared_once_and_whole():
    assert len(BY_NAME) == len(OPTIONS) == len(WEIGH_OPTIONS) + len(SCOUT_OPTIONS)
    for option in OPTIONS:
        assert option.type in (str, int, float, bool) and option.help
        assert option.group in ("weighing", "scout")
        if option.choices:
            assert option.default in option.choices
        if option.default is None:
            assert option.default_help, f"{option.name}: say what its built-in default is"
        elif option.type is not bool:
            assert isinstance(option.default, option.type)


def test_the_cli_flags_are_generated_from_the_options():
    """Every command that weighs has every flagged option, under its name, with its default,
    choices and help."""
    parser = build_parser()
    flagged = [o for o in OPTIONS if o.flags]
    for command in ("weigh", "report", "selftest"):
        args = parser.parse_args([command, "data.conll", "-o", "out.json"])
        assert option_values(args) == {o.name: o.default for o in flagged}
    train = option_values(parser.parse_args(["train", "data.conll", "-o", "model/"]))
    assert set(train) == {o.name for o in SCOUT_OPTIONS if o.flags}
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = {a.dest: a for a in commands.choices["weigh"]._actions}
    for option in flagged:
        action = actions[option.name]
        assert tuple(action.option_strings[: len(option.flags)]) == option.flags
        assert action.help.startswith(option.help)
        assert tuple(action.choices or ()) == option.choices
    assert (
        "(default: NER: 3 from 2,000 to 5,000 annotations, else 1; classification: 1)"
        in actions["n_scouts"].help
    )
    assert "(default: 1/3)" in actions["w_min"].help
    args = parser.parse_args(["weigh", "d.conll", "-o", "w.jsonl", "--no-crf", "--scouts", "2"])
    assert (args.crf, args.n_scouts) == (False, 2)


def test_add_arguments_makes_switches_and_skips_options_without_a_flag():
    parser = argparse.ArgumentParser()
    add_arguments(parser, [BY_NAME["crf"], BY_NAME["freeze_encoder"], BY_NAME["quantize"]])
    assert vars(parser.parse_args([])) == {"crf": True, "freeze_encoder": False}
    assert vars(parser.parse_args(["--no-crf", "--freeze-encoder"])) == {
        "crf": False,
        "freeze_encoder": True,
    }


def test_a_settings_table_gets_zero_for_a_built_in_default():
    epochs = BY_NAME["epochs"].setting()
    assert epochs["default"] == 0 and epochs["minimum"] == 0
    assert epochs["help"].startswith("scout training epochs (0: 3 for NER")
    assert BY_NAME["scout_model"].setting()["default"] == ""
    assert BY_NAME["scout_model"].setting()["help"].endswith("(empty: the bundled offline MiniLM)")
    p = BY_NAME["p"].setting()
    assert (p["default"], p["minimum"], p["below"]) == (0.1, 0.0, 1.0)
    assert BY_NAME["method"].setting()["choices"] == BY_NAME["method"].choices
    assert Option("x", int, 3, "x").setting()["help"] == "x"


@pytest.mark.parametrize("unset", [{}, None, 0])
def test_build_weigher_reads_options_and_their_built_in_defaults(unset):
    from subregweigh.build import BUILT_IN, build_weigher
    from subregweigh.scout import Scout
    from subregweigh.weigh import SubRegWeigh

    options = {} if unset == {} else dict.fromkeys(BUILT_IN, unset)
    srw = build_weigher(options, "ner", progress=False)
    plain = SubRegWeigh(Scout(progress=False), progress=False, n_jobs=1)
    assert {k: v for k, v in vars(srw).items() if k != "scout"} == {
        k: v for k, v in vars(plain).items() if k != "scout"
    }
    assert srw.scout.get_params() == plain.scout.get_params()

    given = {"k": 4, "n_samples": 8, "seed": 7, "epochs": 2, "n_scouts": 2, "crf": False}
    srw = build_weigher({**given, "retrain_after": 10}, "classification", multi_label=True)
    assert (srw.k, srw.n_samples, srw.random_state, srw.n_scouts, srw.crf) == (4, 8, 7, 2, False)
    scout = srw.scout
    assert (scout.task, scout.multi_label, scout.epochs, scout.random_state) == (
        "classification",
        True,
        2,
        7,
    )
