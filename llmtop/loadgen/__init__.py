"""llmtop.loadgen."""
