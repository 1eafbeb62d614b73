"""Code ptxprobe runs inside a user's program: a module patched the moment the program imports it.

The program runs unmodified; a ``sitecustomize`` ptxprobe puts first on ``PYTHONPATH`` installs the hooks
(``capture.swap`` loads ptxprobe's cubins, ``capture.interpret`` records Triton launches). A program may import
Triton late, or never: a hook waits for its module rather than importing it.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import runpy
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


def write_site(folder: Path, modules: str | tuple[str, ...], purpose: str) -> Path:
    """A ``sitecustomize`` in ``folder`` that installs each of ``modules``' hooks (``install_from_env``), then runs
    the sitecustomize it shadows, if the program's Python has one: the folder goes first on its ``PYTHONPATH``."""
    folder.mkdir(parents=True, exist_ok=True)
    modules = (modules,) if isinstance(modules, str) else modules
    hooks = "".join(f"from {m} import install_from_env\ninstall_from_env()\n" for m in modules)
    (folder / "sitecustomize.py").write_text(
        f"# written by ptxprobe: {purpose}\n{hooks}from ptxprobe.capture.hooks import run_shadowed_site\n"
        "run_shadowed_site(__file__)\n")
    return folder


def run_shadowed_site(own: str) -> None:
    """Run the ``sitecustomize.py`` the one at ``own`` shadows (the next on ``sys.path``), as Python would have run
    it without ptxprobe's: a program's environment keeps its own start-up code."""
    here = Path(own).resolve().parent
    for entry in sys.path:
        folder = Path(entry or ".").resolve()
        if folder != here and (folder / "sitecustomize.py").is_file():
            runpy.run_path(str(folder / "sitecustomize.py"), run_name="sitecustomize")
            return
