"""Where the tests find the repository and the real datasets (``../shared/data`` beside it)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
