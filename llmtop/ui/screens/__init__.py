"""Screens of the llmtop UI."""
