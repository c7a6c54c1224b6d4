"""The options of a face that listens, added to a parser by one function and read back.

- ``--listen…`` for the exporter's ``/metrics``, ``--otlp…`` for the span receiver.
- The flag names are the face's ``Flags`` (``export/server.py``, ``sources/otlp.py``), so
  a parser, a message and the docs name the same options.
- What the options mean (loopback by default, a token or ``--…-no-auth`` off it, TLS) is
  the shared server's (``llmtop/httpserve.py``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from llmtop.httpserve import Flags, Listen, listen_policy

__all__ = ["add_listen_options", "dest", "read_listen"]


def dest(flag: str) -> str:
    """The ``argparse`` attribute of ``flag`` (``--otlp-tls-cert`` → ``otlp_tls_cert``)."""
    return flag.lstrip("-").replace("-", "_")


def add_listen_options(p: Any, flags: Flags, *, listen_help: str,
                       listen_default: str | None = None, receives: str = "serve",
                       tls_also: str = "", more: Callable[[Any], None] | None = None) -> None:
    """Add ``flags``'s address, token, no-auth and TLS options to ``p`` (a parser or an
    argument group). ``receives``: the no-auth help's verb ("serve", "receive on");
    ``tls_also``: what else TLS covers (" (and gRPC over TLS)"); ``more``: adds further
    addresses that share the token and TLS, listed right after the first."""
    p.add_argument(flags.listen, default=listen_default, metavar="ADDR:PORT", help=listen_help)
    if more is not None:
        more(p)
    p.add_argument(flags.token_file, default=None, metavar="FILE",
                   help="require 'Authorization: Bearer <token>' with the token in FILE "
                   "(re-read when it changes)")
    p.add_argument(flags.no_auth, action="store_true",
                   help=f"{receives} a non-loopback address without a token")
    p.add_argument(flags.tls_cert, default=None, metavar="FILE",
                   help=f"serve HTTPS{tls_also} with this PEM certificate (chain)")
    p.add_argument(flags.tls_key, default=None, metavar="FILE",
                   help="its PEM private key (default: in the certificate file)")


def read_listen(args: argparse.Namespace | Any, flags: Flags, *extra: str
                ) -> tuple[dict[str, tuple[str, int]], Listen]:
    """``listen_policy`` of the options ``add_listen_options(…, flags)`` added (and the
    further address flags ``extra`` that share the token and TLS, e.g. a gRPC listener)."""
    addresses = {f: getattr(args, dest(f), None) for f in (flags.listen, *extra)}
    return listen_policy(flags, addresses,
                         token_file=getattr(args, dest(flags.token_file), None),
                         no_auth=bool(getattr(args, dest(flags.no_auth), False)),
                         tls_cert=getattr(args, dest(flags.tls_cert), None),
                         tls_key=getattr(args, dest(flags.tls_key), None))
