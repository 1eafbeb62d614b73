"""Reading a run directory back: the HTML report and repro (re-measure and compare)."""
