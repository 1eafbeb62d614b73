"""Emission: AOT for every target without a GPU, isolated from Triton's cache, launch specialisation."""

from __future__ import annotations

import pytest

from ptxprobe.core.cache import Cache
from ptxprobe.core.errors import SpecError
from ptxprobe.ptx import text as ptx
from ptxprobe.sources import registry
from ptxprobe.sources import triton as tsrc
from tests.conftest import emit_registered

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("arch,marker", [("sm_90a", "wgmma"), ("sm_100a", "tcgen05.mma"), ("sm_120a", "mma.sync")])
def test_emits_each_target_with_its_tensor_core_instructions(emitted, arch, marker):
    e = emitted("fp8e5", arch)
    assert ptx.target_of(e.ptx) == arch
    assert e.entry == "attention"
    assert marker in e.ptx
    assert set(e.stages) == {"ttir", "ttgir", "llir", "ptx"}


def test_repr_name_is_never_served_stale(emitted, tmp_path):
    """Triton's cache ignores repr=; ptxprobe's emission must not."""
    cache = Cache(tmp_path)
    a = emit_registered(cache=cache)
    b = emit_registered(name="cutlass_attention", cache=cache)
    c = emit_registered(cache=cache)
    assert (a.entry, b.entry, c.entry) == ("attention", "cutlass_attention", "attention")
    assert a.ptx == c.ptx


def test_specialisation_mirrors_triton_launch():
    fam = registry.family("attention")
    spec = fam.spec("fp16", 128, False)
    s = tsrc.specialize(fam.fn, fam.launch_args(spec, registry.Problem(seq_len=4096), None))
    assert s.signature["N_CTX"] == "i32"
    assert set(s.signature_names_with_attrs()) == {"Q", "K", "V", "Out", "N_CTX"}
    assert s.signature["sm_scale"] == "fp32"
    # an integer argument equal to 1 becomes a constant, as at launch
    s1 = tsrc.specialize(fam.fn, fam.launch_args(spec, registry.Problem(seq_len=1), None))
    assert s1.signature["N_CTX"] == "constexpr" and s1.constexprs["N_CTX"] == 1
    # not divisible by 16: no divisibility attribute
    s2 = tsrc.specialize(fam.fn, fam.launch_args(spec, registry.Problem(seq_len=4104), None))
    assert "N_CTX" not in s2.signature_names_with_attrs()


def test_a_cached_specialisation_is_the_one_computed(tmp_path):
    """The disk cache stores JSON with sorted keys: a specialisation read back must keep the parameters' order, or
    its divisibility (indices into that order) names other parameters, the emit key changes (Triton compiled again)
    and results record the wrong ``divisible_by_16``."""
    fam = registry.family("attention")
    spec = fam.spec("fp16", 128, False)
    args = fam.launch_args(spec, registry.Problem(seq_len=4096), None)
    cache = Cache(tmp_path)
    fresh = tsrc.cached_specialize(fam.fn, args, cache)
    again = tsrc.cached_specialize(fam.fn, args, cache)  # from the cache
    assert list(again.signature) == list(fresh.signature) == [p.name for p in fam.fn.params]
    assert again.to_json() == fresh.to_json() and again.attrs == fresh.attrs
    assert tsrc.emit_key(fam.fn, again, "sm_90a", {}) == tsrc.emit_key(fam.fn, fresh, "sm_90a", {})


def test_bad_spec_axes():
    fam = registry.family("attention")
    with pytest.raises(SpecError, match="dtype"):
        fam.spec("fp64", 128, False)
    with pytest.raises(SpecError, match="head dim"):
        fam.spec("fp16", 96, False)
    with pytest.raises(SpecError, match="config"):
        fam.spec("fp16", 128, False, "big")
    with pytest.raises(SpecError, match="unknown kernel"):
        registry.family("nope")
