"""Run directories of any age read through one adapter: rows rebuilt from the logs, old layouts and spellings
upgraded on read, the committed layout written by compact."""
