"""Analysis of the committed study runs (not part of the installed tool)."""
