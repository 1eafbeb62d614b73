"""ptxprobe: what does ptxas do differently depending on a kernel's entry symbol name?

The command line is ``ptxprobe`` (``ptxprobe.cli``); the Python API is ``ptxprobe.api`` (a sweep, a run
directory, a GPU comparison of callables). One folder per feature, data flowing one way::

    sources -> ptx (rename, check) -> toolchain (assemble) -> binary (cubin, SASS, diff) -> static / gpu
            -> runs -> reports / explain / capture -> cli
"""

__version__ = "0.1.0"
