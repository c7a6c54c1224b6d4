"""llmtop.record."""
