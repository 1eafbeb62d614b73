"""An experiment's axes are typed where they are held and spelled flat only at the edges (the command line, an
experiment file, a recorded manifest): a user's kernels as ``KernelItem``s (the ``file[:entry][=spec]`` spelling read
once, written back only for manifests), the registered families' axes as the families' own (``FamilyAxes``)."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from ptxprobe.core.errors import SpecError
from ptxprobe.core.items import KernelItem
from ptxprobe.runs.request import UserKernels
from ptxprobe.static.experiment import (
    FAMILY_AXES,
    Experiment,
    FamilyAxes,
    experiment_from_dict,
    override,
    parse_assignments,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("axis", "text", "item"), [
    ("ptx_files", "k.ptx", KernelItem("k.ptx")),
    ("cu_files", "k.cu:vadd=k.toml", KernelItem("k.cu", "vadd", "k.toml")),
    ("lib_files", "lib.so:_Z4gemmILi1EEvv", KernelItem("lib.so", "_Z4gemmILi1EEvv")),
    ("triton_functions", "mod.py:kernel=spec.json", KernelItem("mod.py:kernel", None, "spec.json")),
])
def test_the_spelling_is_read_into_an_item_and_written_back_as_it_was(axis, text, item):
    assert KernelItem.parse(axis, text) == item and item.spelled() == text


def test_an_experiment_holds_items_and_its_manifest_spells_them_as_before(tmp_path):
    (tmp_path / "k.cu").write_text("")
    exp = experiment_from_dict({"name": "x", "kernels": [], "cu_files": [f"{tmp_path / 'k.cu'}:vadd=s.toml"],
                                "ptx_files": "one.ptx"})
    assert exp.cu_files == (KernelItem(str(tmp_path / "k.cu"), "vadd", "s.toml"),)
    assert exp.ptx_files == (KernelItem("one.ptx"),)
    recorded = json.loads(json.dumps(exp.to_json()))  # what a manifest holds: the command-line spelling
    assert recorded["cu_files"] == [f"{tmp_path / 'k.cu'}:vadd=s.toml"] and recorded["ptx_files"] == ["one.ptx"]
    assert experiment_from_dict({k: v for k, v in recorded.items() if k != "source"}) == exp
    assert override(exp, {"archs": ["sm_80"]}).cu_files == exp.cu_files  # items pass through, never re-read


def test_an_entry_given_apart_is_never_split_again_at_a_colon_an_equals_sign_or_a_comma(tmp_path):
    """``--entry 'Tile<a=1, b>::operator='``: once it was glued to its path and split again at '=' (read as a
    spec) and a comma; as an item it stays whole."""
    ptx = tmp_path / "k.ptx"
    ptx.write_text("")
    entry = "Tile<a=1, b>::operator="
    (item,) = UserKernels(ptx=(str(ptx),), entry=entry).axes()["ptx_files"]
    assert item == KernelItem(str(ptx), entry, None)
    glued = KernelItem.parse("ptx_files", f"{ptx}:{entry}")  # the old way: the spelling read back
    assert glued != item
    exp = experiment_from_dict({"name": "x", "kernels": [], "ptx_files": [item]})
    assert exp.ptx_files == (item,)


def test_a_file_on_the_command_line_may_name_its_entry_and_the_options_fill_in_the_rest(tmp_path):
    lib = tmp_path / "k.so"
    lib.write_text("")
    axes = UserKernels(lib=(f"{lib}:vadd", str(lib)), spec="s.toml").axes()
    assert axes["lib_files"] == [KernelItem(str(lib), "vadd", "s.toml"), KernelItem(str(lib), None, "s.toml")]
    assert UserKernels(triton="m.py:fn", spec="s.json").axes()["triton_functions"] == [
        KernelItem("m.py:fn", None, "s.json")]


def test_the_registered_families_axes_are_their_own_and_spelled_flat_beside_the_others(tmp_path):
    """Head dims, masks, configs and the sequence length mean something to the attention families alone: they live
    in ``Experiment.families``, not on every experiment, while files, -s and manifests keep their flat keys."""
    assert not {f.name for f in fields(Experiment)} & set(FAMILY_AXES)
    exp = experiment_from_dict({"name": "x", "dtypes": ["fp8e5"], "head_dims": [64], "seq_len": "1024"})
    assert exp.families == FamilyAxes(dtypes=("fp8e5",), head_dims=(64,), seq_len=1024)
    recorded = exp.to_json()
    assert list(recorded)[:7] == ["name", "description", "kernels", "dtypes", "head_dims", "causal", "configs"]
    assert recorded["head_dims"] == (64,) and recorded["seq_len"] == 1024 and "families" not in recorded
    assert experiment_from_dict({k: v for k, v in recorded.items() if k != "source"}) == exp
    narrowed = override(exp, parse_assignments(["causal=true,false", "archs=sm_80"]))
    assert narrowed.families.causal == (True, False) and narrowed.families.head_dims == (64,)
    assert narrowed.axis("causal") == (True, False) and narrowed.axis("archs") == ("sm_80",)
    with pytest.raises(SpecError, match="head_dims: 'x' is not an integer"):
        override(exp, parse_assignments(["head_dims=x"]))
    (tmp_path / "k.ptx").write_text("")
    mine = experiment_from_dict({"name": "u", "kernels": [], "ptx_files": [str(tmp_path / "k.ptx")]})
    assert mine.families.kernels == () and mine.has_user_kernels
