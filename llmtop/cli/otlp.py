"""``--otlp-listen``: the OTLP trace receiver's options (TUI, ``--once``, ``record``,
``export``) and starting it (``docs/requests.md``).

Loopback by default; any other address only when given explicitly, and then with a token
file (``--otlp-token-file``, a bearer token the engines' exporters send as
``OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer <token>``) unless ``--otlp-no-auth``, as
the exporter's ``--listen`` (the same options and server, ``cli/listen.py`` and
``llmtop/httpserve.py``).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from llmtop.errors import ConfigError

__all__ = ["OTLP_DESTS", "add_otlp_options", "listen_for_demo", "start_demo_sending",
           "start_receiver"]

log = logging.getLogger("llmtop.otlp")

GRPC_LISTEN = "--otlp-grpc-listen"
"""OTLP/gRPC's address: the token and TLS options of ``--otlp-listen`` apply to it too."""
OTLP_DESTS = {"otlp_listen", "otlp_grpc_listen", "otlp_token_file", "otlp_no_auth",
              "otlp_tls_cert", "otlp_tls_key"}


def add_otlp_options(p: argparse.ArgumentParser) -> None:
    """The receiver's options."""
    from llmtop.cli.listen import add_listen_options
    from llmtop.sources.otlp import OTLP_FLAGS

    def grpc(g: Any) -> None:
        g.add_argument(GRPC_LISTEN, default=None, metavar="ADDR:PORT",
                       help="also receive OTLP/gRPC here (e.g. 127.0.0.1:4317; needs the "
                       "otlp-grpc extra: pip install 'llmtop-tui[otlp-grpc]')")

    add_listen_options(p.add_argument_group("request spans (OTLP receiver, docs/requests.md)"),
                       OTLP_FLAGS, receives="receive on", tls_also=" (and gRPC over TLS)",
                       more=grpc,
                       listen_help="receive the engines' request spans over OTLP/HTTP here "
                       "(e.g. 127.0.0.1:4318; engines send to http://ADDR:PORT/v1/traces)")


def listen_for_demo(args: Any) -> None:
    """The TUI on ``--demo`` receives the demo engines' request spans: without
    ``--otlp-listen`` / ``--otlp-grpc-listen`` the receiver takes a free loopback port (the
    demo is told where by ``--otlp-traces-endpoint``). ``--once`` is left as it was."""
    if (getattr(args, "demo", False) and not getattr(args, "once", False)
            and not getattr(args, "otlp_listen", None)
            and not getattr(args, "otlp_grpc_listen", None)):
        args.otlp_listen = "127.0.0.1:0"


def start_demo_sending(args: Any, config: Any, spans: Any) -> Any:
    """``--demo``'s engines, told to send their request spans to ``spans`` (the receiver,
    or None: they send none); ``spans`` is closed when the demo cannot start."""
    from llmtop.demo.launcher import start_demo

    try:
        return start_demo(scenario=args.demo_scenario, config=config,
                          otlp_endpoint=spans.url if spans is not None else None)
    except BaseException:
        if spans is not None:
            spans.close()
        raise


def start_receiver(args: Any) -> Any:
    """The ``OtlpReceiver`` the options ask for, or None without ``--otlp-listen`` /
    ``--otlp-grpc-listen``. Raises ``ConfigError`` on a bad address or missing token."""
    http = getattr(args, "otlp_listen", None)
    grpc_at = getattr(args, "otlp_grpc_listen", None)
    if not http and not grpc_at:
        return None
    from llmtop.cli.listen import read_listen
    from llmtop.sources.otlp import OTLP_FLAGS, OtlpReceiver

    parsed, where = read_listen(args, OTLP_FLAGS, GRPC_LISTEN)
    rx = OtlpReceiver(where.host, where.port, allows=where.allows, tls=where.tls)
    if not http:  # gRPC only: the HTTP side listens on a free loopback port, unused
        log.info("OTLP/HTTP not asked for; gRPC only")
    else:
        log.info("receiving spans on %s%s", rx.url,
                 " (bearer token required)" if where.allows else "")
    if grpc_at:
        from llmtop.sources.otlp_grpc import start_grpc

        ghost, gport = parsed[GRPC_LISTEN]
        cert, key = args.otlp_tls_cert, args.otlp_tls_key
        try:
            _server, bound = start_grpc(rx, ghost, gport, tls_cert=_read(cert) if cert else None,
                                        tls_key=_read(key) if key else None)
        except ConfigError:
            rx.close()
            raise
        log.info("receiving spans over gRPC on %s:%d", ghost, bound)
    return rx


def _read(path: str) -> bytes:
    import os

    try:
        with open(os.path.expanduser(path), "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
