"""llmtop.gpu."""
