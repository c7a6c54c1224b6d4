"""Fleet mode: read a Prometheus-compatible server and produce the direct mode's rows.

``queries`` builds the PromQL, ``rows`` turns answers into ``EngineRow``/``GpuRecord``,
``monitor`` runs refreshes (a ``Monitor``-shaped object for the UI and ``--once``).
"""

from __future__ import annotations

__all__: list[str] = []
