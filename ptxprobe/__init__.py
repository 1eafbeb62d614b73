"""ptxprobe: what does ptxas do differently depending on a kernel's entry symbol name?

Pipeline, one module per stage, data flowing one way::

    registry -> emit -> rename -> toolchain -> assemble -> cubin -> sass -> diff -> run
             -> sweep / report / repro / cli
"""

__version__ = "0.1.0"
