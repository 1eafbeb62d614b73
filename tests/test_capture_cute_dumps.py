"""The CuTe DSL's kept PTX under ``capture``: two compiles that the DSL names alike both reach the capture.

The DSL names a kept PTX after the host function and its arguments as printed, so two kernels that differ only in an
object's fields write one file, the second over the first (seen with quack-kernels' rotary forward and backward).
Here a stand-in ``cutlass.base_dsl.compiler`` beside the program does exactly that, and ``capture``'s hook
(``capture.cute_keep``, installed by the sitecustomize it puts first on the program's path) must keep both.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from ptxprobe.capture import cute_keep
from ptxprobe.capture.program import run_program
from tests.test_rename import NVCC_STYLE

pytestmark = pytest.mark.integration

COMPILER = textwrap.dedent('''
    import os


    class CompileCallable:  # the DSL's cute.compile, reduced to what it leaves behind: one PTX named after the call
        def __call__(self, kernel_ptx):
            with open(os.path.join(os.environ["CUTE_DSL_DUMP_DIR"], "host_fn_args.ptx"), "w") as f:
                f.write(kernel_ptx)
''')


def _program(tmp_path):
    pkg = tmp_path / "cutlass" / "base_dsl"
    pkg.mkdir(parents=True)
    (tmp_path / "cutlass" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "compiler.py").write_text(COMPILER)
    prog = tmp_path / "prog.py"
    ptx = {name: NVCC_STYLE.replace("_Z9my_kernelPf", name) for name in ("kernel_cutlass_fwd", "kernel_cutlass_bwd")}
    prog.write_text("from cutlass.base_dsl.compiler import CompileCallable\ncompile_ = CompileCallable()\n"
                    + "".join(f"compile_({text!r})\n" for text in ptx.values()) + "print('compiled both')\n")
    return prog


def test_two_compiles_the_dsl_names_alike_are_both_captured(tmp_path):
    prog = _program(tmp_path)
    kernels, _ = run_program([sys.executable, str(prog)], tmp_path / "cap", timeout=120, arch="sm_90a")
    assert sorted(k.entry for k in kernels) == ["kernel_cutlass_bwd", "kernel_cutlass_fwd"]
    assert all(k.frontend == "cute-dsl" for k in kernels)


def test_without_the_hook_the_second_compile_overwrites_the_first(tmp_path, monkeypatch):
    """The fault the hook guards against, shown by switching it off: the capture sets another switch than the
    one the program's hook reads, and the DSL's own behaviour is left."""
    prog = _program(tmp_path)
    monkeypatch.setattr(cute_keep, "ENV", "PTXPROBE_CUTE_KEEP_SWITCHED_OFF")
    kernels, _ = run_program([sys.executable, str(prog)], tmp_path / "cap", timeout=120, arch="sm_90a")
    assert [k.entry for k in kernels] == ["kernel_cutlass_bwd"]


def test_the_programs_own_sitecustomize_still_runs(tmp_path):
    """The capture's sitecustomize shadows any other on the path; it runs the one it shadows."""
    own = tmp_path / "own-site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['PROGRAM_SITE_RAN'] = 'yes'\n")
    prog = _program(tmp_path)
    prog.write_text(prog.read_text() + "import os\nprint('site:', os.environ.get('PROGRAM_SITE_RAN'))\n")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(own)
    try:
        run_program([sys.executable, str(prog)], tmp_path / "cap", timeout=120, arch="sm_90a")
    finally:
        os.environ.pop("PYTHONPATH") if old is None else os.environ.__setitem__("PYTHONPATH", old)
    assert "site: yes" in (tmp_path / "cap" / "program.log").read_text()
