"""Code ptxprobe runs inside a user's program: a module patched the moment the program imports it.

The program runs unmodified; a ``sitecustomize`` ptxprobe puts first on ``PYTHONPATH`` installs the hooks
(``capture.swap`` loads ptxprobe's cubins, ``capture.interpret`` records Triton launches). A program may import
Triton late, or never: a hook waits for its module rather than importing it.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``patch`` right after ``target`` is imported."""

    def __init__(self, target: str, patch: Callable):
        self.target, self.patch = target, patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, patch = spec.loader, self.patch

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec_):
                return loader.create_module(spec_)

            def exec_module(self, module):
                loader.exec_module(module)
                patch(module)

        spec.loader = _Loader()
        return spec


def when_imported(name: str, patch: Callable) -> None:
    """``patch(module)`` now if ``name`` is imported already, else right after the program imports it."""
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, patch))


def write_site(folder: Path, module: str, purpose: str) -> Path:
    """A ``sitecustomize`` in ``folder`` that installs ``module``'s hook (``install_from_env``): the folder goes
    first on the program's ``PYTHONPATH``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        f"# written by ptxprobe: {purpose}\nfrom {module} import install_from_env\ninstall_from_env()\n")
    return folder
