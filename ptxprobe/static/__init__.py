"""The static side: experiments, planning, verdicts and the sweep that needs no GPU."""
