"""Paired statistics of GPU timings: log ratios, intervals and the verdict vocabulary.

The regimes a measurement is made in are named here, importable without the statistics (the CLI's parser offers
them on every call; ``stats.regime`` says what each means for a verdict)."""

BURST = "burst"  # short interleaved units, both codes under the one clock of the moment (the default)
SUSTAINED = "sustained"  # each arm held alone for seconds at the card's power limit, after its clock settles
REGIMES = (BURST, SUSTAINED)  # what a command can be asked to measure in (--regime)
PROGRAM = "program"  # a program A/B: each arm a whole run of the program, the card read in the background
