"""The one record type every module shares.

An :class:`Example` is a list of words with a gold label:

* token tagging (NER): ``label`` holds one IOB2 tag per word;
* text classification: ``label`` holds the example's classes, sorted (one for single-label data).

Both are tuples, so "the prediction equals the gold label" is plain tuple equality, which is
exactly SubRegWeigh's agreement criterion (for NER the whole tag sequence must match).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Task = Literal["ner", "classification"]


@dataclass(frozen=True)
class Example:
    """One annotated example.

    Attributes
    ----------
    id : str
        Stable identifier, used in error messages and output files.
    words : tuple of str
        The text, split into words (CoNLL tokens, or whitespace-split sentences).
    label : tuple of str
        NER: one tag per word. Classification: the sorted tuple of class names.
    source : str
        Where the example came from (``"file:line"``), for error messages. Empty if unknown.
    annotator : str
        Who made the label (a Label Studio annotation's ``completed_by``: the user's email
        when known, else ``"user <id>"``). Empty if unknown. Like ``source``, not compared.
    """

    id: str
    words: tuple[str, ...]
    label: tuple[str, ...]
    source: str = field(default="", compare=False)
    annotator: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        return " ".join(self.words)


class DataError(ValueError):
    """Bad input data. The message names the file and line (or the example id) at fault."""
