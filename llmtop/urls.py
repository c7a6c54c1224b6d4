"""A URL's scheme, host and port, the one way every layer reads them.

- No scheme means ``http://``; the port defaults by scheme (443 for https, else 80).
- A URL that cannot be read (bad port, no host) gives None, never an exception.
- ``netloc`` writes ``host:port`` back, an IPv6 host in brackets.
- Loopback, the one rule and its variants:
  ``is_loopback`` (the name ``localhost`` or a ``*.localhost`` name, any case; an address
  in 127.0.0.0/8; ``::1``; brackets allowed): the servers' "loopback unless told" policy,
  the probe's "load goes only here without asking", the scrape's "never through a proxy";
  ``is_local_peer`` (a sender's address as a server saw it): also True for an empty
  address, which is what a client on a Unix socket has;
  ``is_this_machine`` (a host a URL names, for "is that engine here"): also the wildcard
  addresses ``0.0.0.0`` and ``::`` (a URL naming them reaches this machine) and the loopback
  names distributions put in ``/etc/hosts`` (``ip6-localhost``, ``localhost.localdomain``).
- Below every layer: imports nothing of llmtop.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["THIS_MACHINE_NAMES", "default_port", "host_port", "is_local_peer", "is_loopback",
           "is_this_machine", "netloc", "split_url"]

THIS_MACHINE_NAMES = frozenset({"0.0.0.0", "::", "ip6-localhost", "ip6-loopback",
                                "localhost.localdomain"})
"""Beyond ``is_loopback``: names and addresses a URL may use for this machine."""


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


def netloc(host: str, port: int | None = None) -> str:
    """``host:port`` (``host`` alone when ``port`` is None), an IPv6 host in brackets."""
    h = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return h if port is None else f"{h}:{port}"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and ``*.localhost`` (any case), 127.0.0.0/8 and ``::1``
    (written any way, brackets allowed); False for every other name or address."""
    h = host.strip().strip("[]").lower()
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def is_local_peer(host: str | None) -> bool:
    """True for a sender on this machine: ``is_loopback``, or an empty address (a client on
    a Unix socket has none); False for None (not known)."""
    return host is not None and (host == "" or is_loopback(host))


def is_this_machine(host: str) -> bool:
    """True for ``is_loopback`` hosts, the wildcard addresses and the distributions' loopback
    names (``THIS_MACHINE_NAMES``); any case, brackets allowed."""
    return is_loopback(host) or host.strip().strip("[]").lower() in THIS_MACHINE_NAMES
