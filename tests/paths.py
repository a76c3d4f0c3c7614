"""Where the tests find the repository and the real datasets (``../shared/data`` beside it), the
paths the backend serves, and how a test writes an input file of its own."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"

# Every route of the backend's app (backend/web/routes.py), as the tests expect it
ROUTES = frozenset(
    {
        "/",
        "/health",
        "/is_training",
        "/predict",
        "/report",
        "/report.json",
        "/selftest",
        "/setup",
        "/status",
        "/versions",
        "/webhook",
    }
)


def write(folder: Path, name: str, text: str, newline: str = "\n") -> Path:
    """``folder/name``, written with ``text`` (UTF-8, each line ending in ``newline``)."""
    path = folder / name
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path
