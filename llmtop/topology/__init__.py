"""The serving stack's topology from rows: which engine is which router's backend, roles,
pools and the TTFT path. Rows in, groups out; no I/O, no clock.

``link.link_stack`` (called by the store for every snapshot) fills ``EngineRow.router`` /
``role`` and ``BackendRow.target`` / ``capacity_share``; ``pools.build_pools`` sums the
prefill and decode pools like a model group; ``path.ttft_path`` splits a router's TTFT.
"""
