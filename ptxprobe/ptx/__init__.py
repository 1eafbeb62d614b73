"""PTX text: entries and parameters, renaming an entry (and its DWARF), and the independent check that only the
name changed.
"""
