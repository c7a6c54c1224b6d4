"""llmtop.sources."""
