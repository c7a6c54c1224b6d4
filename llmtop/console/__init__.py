"""Plain-terminal output with Rich (``--once`` tables, probe live display). Never textual."""
