"""SubRegWeigh: find annotation errors in NLP datasets with scouts trained on the annotations.

Tsuji et al., "SubRegWeigh: Effective and Efficient Annotation Weighing with Subword
Regularization", COLING 2025. Heavy modules (torch, transformers) load on first use.
"""

from subregweigh.example import DataError, Example

__version__ = "0.1.0"

__all__ = ["DataError", "Example", "Scout", "SubRegWeigh", "__version__"]


def __getattr__(name):
    # Keep `import subregweigh` light: the CLI's --help and the data tools need no torch.
    if name == "Scout":
        from subregweigh.scout import Scout

        return Scout
    if name == "SubRegWeigh":
        from subregweigh.weigh import SubRegWeigh

        return SubRegWeigh
    raise AttributeError(f"module 'subregweigh' has no attribute {name!r}")
