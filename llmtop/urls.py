"""A URL's scheme, host and port, the one way every layer reads them.

- No scheme means ``http://``; the port defaults by scheme (443 for https, else 80).
- A URL that cannot be read (bad port, no host) gives None, never an exception.
- Below every layer: imports nothing of llmtop.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["default_port", "host_port", "split_url"]


def default_port(scheme: str) -> int:
    """The port a URL of ``scheme`` means when it names none."""
    return 443 if scheme == "https" else 80


def split_url(url: str) -> tuple[str, str, int | None] | None:
    """``(scheme, host, port)`` of ``url`` as written (``port`` None when it names none; an
    IPv6 host without its brackets), or None when it has no host or a bad port."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port


def host_port(url: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``url``, the port defaulted by scheme; None when unreadable."""
    got = split_url(url)
    if got is None:
        return None
    scheme, host, port = got
    return host, port if port is not None else default_port(scheme)
