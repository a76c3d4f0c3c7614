"""Data in and out, one job per module.

* :mod:`~subregweigh.io.readers`: CoNLL, TSV and JSONL files -> examples;
* :mod:`~subregweigh.io.labelstudio`: Label Studio tasks -> examples (tasks from the API for
  the ML backend, an export file for the command line through
  :mod:`~subregweigh.io.labelstudio_export`: one parser for both);
* :mod:`~subregweigh.io.dataset`: :func:`read_dataset` picks the reader by format or file
  extension; :func:`write_dataset` writes examples back;
* :mod:`~subregweigh.io.weights`: per-example weights and scores out (CoNLL, JSONL, CSV), and
  back in;
* :mod:`~subregweigh.io.atomic`: the atomic write every writer uses.

Bad data raises :class:`~subregweigh.example.DataError` whose message starts with
``"{path}:{line}: "`` (or ``"{path}:task {id}: "`` for a Label Studio export).
"""

from subregweigh.io.atomic import atomic_open, atomic_write_json, atomic_write_text, check_writable
from subregweigh.io.dataset import read_dataset, write_dataset
from subregweigh.io.labelstudio_export import read_label_studio
from subregweigh.io.readers import read_conll, read_jsonl, read_tsv
from subregweigh.io.weights import (
    read_weighted_conll,
    read_weights,
    write_weighted_conll,
    write_weighted_csv,
    write_weighted_jsonl,
    write_weights,
)

__all__ = [
    "atomic_open",
    "atomic_write_json",
    "atomic_write_text",
    "check_writable",
    "read_conll",
    "read_dataset",
    "read_jsonl",
    "read_label_studio",
    "read_tsv",
    "read_weighted_conll",
    "read_weights",
    "write_dataset",
    "write_weighted_conll",
    "write_weighted_csv",
    "write_weighted_jsonl",
    "write_weights",
]
