"""The weigher a set of option values asks for: one recipe for the CLI, the Label Studio backend
and the benchmarks.

Option values come by the names of :data:`subregweigh.options.OPTIONS` (a Mapping: a settings
object's dict, the CLI's parsed flags through :func:`subregweigh.options.option_values`). A
missing name takes its option's default; for the options whose default is built in
(``scout_model``, ``epochs``, ``max_steps``, ``learning_rate``, ``max_length``, ``n_scouts``),
0, "" and None all mean that default, as a settings table that cannot hold None spells it.
Other keys are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from subregweigh.example import Task
from subregweigh.options import BY_NAME
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh

# Options whose default is built in (it depends on the task or the encoder): 0, "" and None
# stand for it.
BUILT_IN = ("scout_model", "epochs", "max_steps", "learning_rate", "max_length", "n_scouts")


def _value(options: Mapping[str, Any], name: str):
    value = options.get(name, BY_NAME[name].default)
    if name in BUILT_IN and not value:
        return None
    return value


def weigher_params(options: Mapping[str, Any], progress: bool = True) -> dict[str, Any]:
    """The :class:`~subregweigh.weigh.SubRegWeigh` parameters ``options`` set, other than the
    scout, ``n_scouts`` and ``crf`` (the parts): what :meth:`SubRegWeigh.from_parts` and
    :meth:`SubRegWeigh.load` take beside the parts."""
    return {
        "p": _value(options, "p"),
        "n_samples": _value(options, "n_samples"),
        "k": _value(options, "k"),
        "method": _value(options, "method"),
        "w_min": _value(options, "w_min"),
        "softmin_temperature": _value(options, "softmin_temperature"),
        "memory_strength": _value(options, "memory_strength"),
        "rest_on_crf": _value(options, "rest_on_crf"),
        "random_state": _value(options, "seed"),
        "n_jobs": _value(options, "n_jobs"),
        "progress": progress,
    }


def build_scout(
    options: Mapping[str, Any], task: Task, multi_label: bool = False, progress: bool = True
) -> Scout:
    """The unfitted :class:`~subregweigh.scout.Scout` ``options`` describe, for ``task``
    (``multi_label``: classification whose examples may carry several classes)."""
    return Scout(
        model=_value(options, "scout_model"),
        task=task,
        multi_label=multi_label,
        freeze_encoder=_value(options, "freeze_encoder"),
        epochs=_value(options, "epochs"),
        max_steps=_value(options, "max_steps"),
        min_steps=_value(options, "min_steps"),
        batch_size=_value(options, "batch_size"),
        learning_rate=_value(options, "learning_rate"),
        max_length=_value(options, "max_length"),
        quantize=_value(options, "quantize"),
        precision=_value(options, "precision"),
        random_state=_value(options, "seed"),
        device=_value(options, "device"),
        progress=progress,
    )


def build_weigher(
    options: Mapping[str, Any], task: Task, multi_label: bool = False, *, progress: bool = True
) -> SubRegWeigh:
    """The unfitted :class:`~subregweigh.weigh.SubRegWeigh` ``options`` describe, its scout
    template for ``task`` included (:func:`build_scout`); ``progress``: show progress bars.

    ``freeze_encoder`` is passed on as given: a NER scout refuses it when it trains (a caller
    that applies one value to every task masks it for NER).
    """
    return SubRegWeigh(
        build_scout(options, task, multi_label, progress),
        n_scouts=_value(options, "n_scouts"),
        crf=_value(options, "crf"),
        **weigher_params(options, progress),
    )
