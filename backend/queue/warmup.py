"""Start-up: the engine's code imported before the first job needs it.

``transformers`` imports a model's code lazily, on the first load of such a model, and the
engine's modules are imported by the first training: some 3 s on 2 cores that a project's first
training after a start would otherwise wait for (the CRF's early scores come that much later).
The server and the rq worker import them once at start-up instead; the worker's jobs, forked
from it, inherit them.
"""

from __future__ import annotations

import logging
import time

from backend.config.settings import Settings

logger = logging.getLogger(__name__)


def import_engine(settings: Settings) -> bool:
    """Import the engine, CRFsuite and the scout model's ``transformers`` code
    (:func:`subregweigh.encoder.import_model_code`). False, with a warning, where something
    cannot be imported now: the first training imports it then, or says what is missing."""
    began = time.perf_counter()
    try:
        import pycrfsuite  # noqa: F401

        import subregweigh.build
        import subregweigh.crf  # noqa: F401
        from subregweigh.encoder import import_model_code
        from subregweigh.scout import default_model

        import_model_code(settings.scout_model or default_model())
    except (ImportError, OSError, RuntimeError, ValueError) as err:
        logger.warning("the engine's code is left to the first training to import: %s", err)
        return False
    logger.info("imported the engine's code in %.1f s", time.perf_counter() - began)
    return True
