"""Widgets of the llmtop UI."""
