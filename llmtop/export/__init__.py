"""The exporter: rows, GPUs and findings served as Prometheus series (``docs/exporter.md``)."""
