"""From diagnosis to prescription: the fastest entry name x ptxas release x ptxas options per kernel.

``space`` builds the candidates, ``prune`` groups them by machine code (what is not distinct is never timed),
``race`` is successive halving over the distinct codes on any measurement (pure: tested on simulated timings),
``gpu`` plugs the calibrated paired GPU measurement and the numerics gate in, ``run`` ties them to the static
sweep and writes ``DIR/tuned.json`` (``answer``), and ``apply`` runs a program with the tuned cubins swapped in.
"""
