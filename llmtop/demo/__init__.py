"""llmtop.demo."""
