"""llmtop.history."""
