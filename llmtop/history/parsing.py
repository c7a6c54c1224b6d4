"""One body into an ``EngineSample``: detect the engine when unknown, normalize, retry once.

- ``parse_body``: (sample, error, engine used); a detected engine whose adapter fails is
  detected again once (another engine may serve the port now), a hinted one is not.
- ``default_normalize`` / ``default_detect``: the parse layer's, imported when first used.

Pure apart from the adapters' caches; the store calls it from ``ingest`` (or the monitor
from a worker thread for a large body, ``Store.parse_raw``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmtop.model import EngineSample, RawScrape
from llmtop.parse.exposition import ParseError

__all__ = ["Detector", "Normalizer", "ParsedScrape", "default_detect", "default_normalize",
           "parse_body"]

Normalizer = Callable[..., EngineSample]
Detector = Callable[..., "str | None"]

ParsedScrape = tuple[EngineSample | None, str | None, str | None]
"""What parsing one body gave: (sample or None, error or None, engine used or None)."""


def default_normalize(engine: str, body: str, **kw: Any) -> EngineSample:
    """``parse.registry.normalize`` (raises ``ParseError``)."""
    from llmtop.parse import registry

    return registry.normalize(engine, body, **kw)


def default_detect(body: str, content_type: str | None, identity: dict | None) -> str | None:
    """``parse.detect.detect_engine``."""
    from llmtop.parse import detect

    return detect.detect_engine(body, content_type, identity)


def parse_body(normalize: Normalizer, detect: Detector, engine: str | None, hinted: bool,
               identity: dict[str, Any] | None, host: str, raw: RawScrape) -> ParsedScrape:
    """(sample, error, engine used) for ``raw``'s body (not None)."""
    assert raw.body is not None
    ident = {"host": host, **(identity or {})}
    for attempt in range(2):
        if engine is None:
            try:
                engine = detect(raw.body, raw.content_type, identity)
            except Exception as exc:  # a detector bug must not stop the store
                return None, f"engine detection failed: {type(exc).__name__}: {exc}", None
            if engine is None:
                return None, "not a metrics format llmtop knows (no engine detected)", None
        try:
            sample = normalize(engine, raw.body, headers=raw.headers, identity=ident)
        except ParseError as exc:
            err = str(exc) or "unparseable metrics"
        except Exception as exc:  # an adapter bug: report it as a bad payload
            err = f"{engine} adapter failed: {type(exc).__name__}: {exc}"
        else:
            return sample, None, engine
        if hinted or attempt == 1:
            return None, err, None
        engine = None  # a detected engine failed: the port may serve another now
    return None, "unparseable metrics", None
