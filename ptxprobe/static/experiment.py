"""Experiments: the axes of a rename sweep, from a TOML file and ``-s axis=values`` overrides.

Every value is checked when the experiment is built, so nonsense (``repeat=0``,
``causal=maybe``, ``archs=sm90``) is refused before any work, with the axis named.
Experiments shipped with ptxprobe live in ``ptxprobe/experiments`` and are found by name
(``-e default``) through ``importlib.resources``.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path

import tomllib

from ptxprobe.core.errors import SpecError
from ptxprobe.core.items import USER_AXES, KernelItem
from ptxprobe.ptx.rename import module_wide
from ptxprobe.toolchain.assemble import TRITON_FLAGS, resolve_flag_files

KNOWN_ARCHS = ("sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a",
               "sm_101a", "sm_103a", "sm_110a", "sm_120", "sm_120a", "sm_121a")
_ARCH_RE = re.compile(r"sm_(\d+)([af]?)")


@dataclass(frozen=True)
class FamilyAxes:
    """The axes of ptxprobe's registered kernel families (the attention kernels it ships): which families, the element
    types, head dimensions, masks and block configs each is built at, and the sequence length its launch is
    specialised for. A sweep of the user's own kernels has no families (``kernels`` empty); the rest then mean
    nothing. Experiment files, ``-s`` and manifests spell them flat, beside the other axes."""

    kernels: tuple[str, ...] = ("attention",)
    dtypes: tuple[str, ...] = ("fp16",)
    head_dims: tuple[int, ...] = (128,)
    causal: tuple[bool, ...] = (False,)
    configs: tuple[str, ...] = ("default",)
    seq_len: int = 4096


FAMILY_AXES = tuple(f.name for f in fields(FamilyAxes))


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str = ""
    families: FamilyAxes = field(default_factory=FamilyAxes)
    archs: tuple[str, ...] = ("sm_90a",)
    ptxas: tuple[str, ...] = ("triton",)
    flags: tuple[tuple[str, ...], ...] = (TRITON_FLAGS,)  # full ptxas flag lists (besides -v/--gpu-name)
    names: tuple[str, ...] = ("{base}", "cutlass_{base}")
    repeat: dict = field(default_factory=lambda: {"default": 1})
    ptx_files: tuple[KernelItem, ...] = ()  # spelled "file.ptx[:entry][=spec.toml]"
    cu_files: tuple[KernelItem, ...] = ()  # "file.cu[:entry][=spec.toml]", compiled by nvcc for every arch
    cubin_files: tuple[KernelItem, ...] = ()  # cubins with embedded PTX (-lineinfo)
    lib_files: tuple[KernelItem, ...] = ()  # "lib.so|.fatbin|.cubin|.whl[:entry][=spec.toml]": the PTX they embed
    triton_functions: tuple[KernelItem, ...] = ()  # "module:function=spec.json" (or .toml)
    file_archs: tuple[str, ...] = ()  # re-target PTX/cubin/library files to these archs (empty: their own .target)
    max_repeat: int = 0  # assemble a difference up to this many times until `confidence` (0: exactly `repeat`)
    confidence: float = 0.98  # the confidence a "differs" verdict must reach when max_repeat > repeat
    run: dict = field(default_factory=dict)  # the [run] table: GPU problem sizes and timing plan
    source: str | None = None  # path of the TOML it came from

    def repeats(self, arch: str) -> int:
        return int(self.repeat.get(arch, self.repeat.get("default", 1)))

    def axis(self, name: str):
        """An axis by the name files and ``-s`` give it (a family's axis among them)."""
        return getattr(self.families if name in FAMILY_AXES else self, name)

    def axes(self) -> dict:
        """Every axis by its flat name, typed, in the order experiment files and manifests give them."""
        return {name: self.axis(name) for name in SPELLED}

    def to_json(self) -> dict:
        """As a manifest records it: every axis flat, the user's kernels in their command-line spelling
        (``KernelItem.spelled``)."""
        out = copy.deepcopy(self.axes())
        return {**out, **{axis: [i.spelled() for i in out[axis]] for axis in USER_AXES}}

    @property
    def has_user_kernels(self) -> bool:
        return any(getattr(self, axis) for axis in USER_AXES)


# the flat names, in the order manifests have always recorded them
SPELLED = ("name", "description", "kernels", "dtypes", "head_dims", "causal", "configs", "archs", "ptxas", "flags",
           "names", "repeat", "seq_len",
           "ptx_files", "cu_files", "cubin_files", "lib_files", "triton_functions", "file_archs", "max_repeat",
           "confidence", "run", "source")
LIST_AXES = ("kernels", "dtypes", "head_dims", "causal", "configs", "archs", "ptxas", "names", "ptx_files",
              "cu_files", "cubin_files", "lib_files", "triton_functions", "file_archs")
_FILE_SUFFIXES = (".ptx", ".cu", ".cubin", ".so", ".fatbin", ".whl")
_TABLES = ("experiment", "sweep", "run")


def shipped() -> dict[str, Path]:
    """The experiments that come with ptxprobe, by name."""
    root = resources.files("ptxprobe") / "experiments"
    return {p.name[: -len(".toml")]: Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml")}


def find_experiment(name_or_path: str | os.PathLike | None) -> Path:
    """A path to an experiment TOML, or the name of a shipped one (``default``)."""
    if name_or_path is None:
        return shipped()["default"]
    p = Path(name_or_path)
    if p.is_file():
        return p
    if p.is_dir():
        raise SpecError(f"experiment {p} is a directory, not a TOML file")
    known = shipped()
    if str(name_or_path) in known:
        return known[str(name_or_path)]
    raise SpecError(f"experiment file not found: {p} (shipped experiments: {', '.join(sorted(known))})")


def _resolve_item(item: str, base: Path) -> str:
    """Paths inside an experiment file are relative to that file's directory (one found only from here is taken
    as it is); a file found in neither is refused now, naming where it was looked for."""
    def fix(part: str) -> str:
        path, sep, rest = part.partition(":") if not part.endswith(_FILE_SUFFIXES) else (part, "", "")
        if path and not os.path.isabs(path) and (path.endswith((".py", *_FILE_SUFFIXES, ".toml", ".json"))):
            cand = base / path
            if cand.exists():
                path = os.path.relpath(cand)
            elif not Path(path).exists():
                raise SpecError(f"{path}: no such file in {base} (an experiment file's paths are relative to its "
                                "folder) nor here")
        return path + sep + rest

    target, eq, spec = item.rpartition("=")
    return f"{fix(target)}={fix(spec)}" if eq else fix(item)


def load_experiment(path: str | os.PathLike | None) -> Experiment:
    p = find_experiment(path)
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p}: not valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: cannot read ({exc})") from exc
    unknown = sorted(set(data) - set(_TABLES))
    if unknown:
        raise SpecError(f"{p}: unknown table(s) {', '.join(f'[{t}]' for t in unknown)}; an experiment has "
                        f"{', '.join(f'[{t}]' for t in _TABLES)}")
    for table in _TABLES:
        if not isinstance(data.get(table, {}), dict):
            raise SpecError(f"{p}: {table} = {data[table]!r}: expected a table [{table}]")
    meta = data.get("experiment", {})
    extra = sorted(set(meta) - {"name", "description"})
    if extra:
        raise SpecError(f"{p}: [experiment] has unknown keys {', '.join(extra)} (known: name, description)")
    sweep = dict(data.get("sweep", {}))
    for axis in USER_AXES:
        if axis in sweep:
            items = sweep[axis] if isinstance(sweep[axis], list) else [sweep[axis]]
            sweep[axis] = [_resolve_item(str(i), p.parent) for i in items]
    return experiment_from_dict(
        {**sweep, "name": meta.get("name", p.stem), "run": data.get("run", {}),
         "description": meta.get("description", ""), "source": str(p)}
    )


def _as_int(axis: str, v, low: int = 1) -> int:
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise SpecError(f"{axis}: {v!r} is not an integer") from None
    if isinstance(v, float) and v != n or n < low:
        raise SpecError(f"{axis}: {v!r} must be an integer >= {low}")
    return n


def _as_bool(axis: str, v) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "causal"):
        return True
    if s in ("0", "false", "no", "full"):
        return False
    raise SpecError(f"{axis}: {v!r} is not true/false")


def check_arch(arch: str) -> str:
    """A target ptxprobe can build for and read (Volta and newer), refused before a compiler aborts on it."""
    m = _ARCH_RE.fullmatch(arch)
    if not m or int(m.group(1)) < 70 or arch not in KNOWN_ARCHS:
        raise SpecError(f"arch {arch!r} is not a target ptxprobe knows (have: {', '.join(KNOWN_ARCHS)})")
    return arch


def recorded_axes(manifest: dict) -> dict:
    """The axes a run directory's manifest recorded, ready for ``experiment_from_dict`` (its file path dropped);
    a manifest that records none cannot be re-run, said as such (bad input, not a KeyError)."""
    if not isinstance(manifest.get("experiment"), dict):
        raise SpecError("the manifest records no experiment (no \"experiment\" object): nothing to re-run")
    d = dict(manifest["experiment"])
    d.pop("source", None)
    return d


def experiment_from_dict(d: dict) -> Experiment:
    """An experiment from axis values (lists or scalars); every value validated."""
    known = set(SPELLED)
    unknown = set(d) - known
    if unknown:
        raise SpecError(f"unknown sweep keys: {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
    kw = dict(d)
    for k in LIST_AXES:
        if k in kw:
            v = kw[k]
            kw[k] = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    if "flags" in kw:
        kw["flags"] = tuple(resolve_flag_files(tuple(f.split()) if isinstance(f, str) else tuple(f))
                            for f in kw["flags"])
    if "repeat" in kw:
        rep = kw["repeat"] if isinstance(kw["repeat"], dict) else {"default": kw["repeat"]}
        kw["repeat"] = {str(a): _as_int(f"repeat ({a})", n) for a, n in rep.items()}
    for axis in USER_AXES:  # the spelling read once, here: typed items from here on
        if axis in kw:
            kw[axis] = tuple(KernelItem.of(axis, v) for v in kw[axis] if v)
    if "head_dims" in kw:
        kw["head_dims"] = tuple(_as_int("head_dims", v) for v in kw["head_dims"])
    if "causal" in kw:
        kw["causal"] = tuple(_as_bool("causal", v) for v in kw["causal"])
    for k in ("seq_len",):
        if k in kw:
            kw[k] = _as_int(k, kw[k])
    if "max_repeat" in kw:
        kw["max_repeat"] = _as_int("max_repeat", kw["max_repeat"], low=0)
    if "confidence" in kw:
        try:
            kw["confidence"] = float(kw["confidence"])
        except (TypeError, ValueError):
            raise SpecError(f"confidence: {kw['confidence']!r} is not a number") from None
        if not 0.0 < kw["confidence"] < 1.0:
            raise SpecError(f"confidence: {kw['confidence']} must be between 0 and 1")
    for k in ("archs", "file_archs"):
        if k in kw:
            kw[k] = tuple(check_arch(str(a)) for a in kw[k])
    for k in LIST_AXES:
        twice = sorted({str(v) for v in kw.get(k, ()) if list(kw[k]).count(v) > 1})
        if twice and k != "names":
            raise SpecError(f"{k}: {', '.join(twice)} given twice (each value once)")
    exp = Experiment(**{k: v for k, v in kw.items() if k not in FAMILY_AXES},
                     families=FamilyAxes(**{k: v for k, v in kw.items() if k in FAMILY_AXES}))
    if exp.max_repeat and exp.max_repeat < max(exp.repeat.values(), default=1):
        raise SpecError(f"max_repeat: {exp.max_repeat} is below repeat ({max(exp.repeat.values())}): a difference is "
                        "assembled at least repeat times; give max_repeat >= repeat, or 0 (exactly repeat)")
    if not exp.names:
        raise SpecError("names: at least the baseline template is needed")
    if len(set(exp.names)) != len(exp.names):
        raise SpecError(f"names: a template is given twice ({', '.join(exp.names)})")
    for n in exp.names:
        if n != n.strip() or not n:
            raise SpecError(f"bad name template {n!r}")
    if module_wide(exp.names[0]):
        raise SpecError(f"names: the baseline {exp.names[0]} may not respell the module: the module's other symbols "
                        "keep their names in the baseline, and {module_untriggered} is compared with it")
    if not exp.archs and not exp.has_user_kernels:
        raise SpecError("archs: at least one target is needed")
    if not exp.families.kernels and not exp.has_user_kernels:
        raise SpecError("nothing to sweep: no kernels and no user kernel files")
    if not exp.ptxas:
        raise SpecError("ptxas: at least one is needed (triton, all, newest, a version or a path)")
    if not exp.flags:
        raise SpecError("flags: at least one flag list is needed (an empty list is plain ptxas)")
    return exp


def parse_assignment(a: str) -> tuple[str, object]:
    """``axis=v1,v2`` from the command line as (axis, values)."""
    if "=" not in a:
        raise SpecError(f"-s takes axis=value[,value...], got {a!r}")
    key, _, raw = a.partition("=")
    key = key.strip().replace("-", "_")
    vals = [v.strip() for v in raw.split(",") if v.strip()]
    if key in ("repeat", "seq_len", "max_repeat", "confidence"):
        if len(vals) != 1:
            raise SpecError(f"{key} takes one value, got {raw!r}")
        return key, vals[0]
    if key == "flags":
        return key, [part.split() for part in raw.split(";")]
    if key in ("name", "description", "run", "source"):
        raise SpecError(f"-s cannot set {key!r}")
    return key, vals


def check_assignments(assignments: Sequence[str]) -> None:
    """The user's own ``-s`` list: an axis set twice would silently keep the last, an axis set to nothing would
    silently drop it (``-s flags=`` is a value: one empty flag list, plain ptxas)."""
    given: dict[str, str] = {}
    for a in assignments:
        key, vals = parse_assignment(a)
        if key in given:
            raise SpecError(f"{key}: set twice (-s {given[key]} and -s {a.strip()}); give every value in one: "
                            f"-s {key}=V1,V2")
        given[key] = a.strip()
        if key != "flags" and not vals:
            what = " (the first is the baseline template, e.g. {base},cutlass_{base})" if key == "names" else ""
            raise SpecError(f"{key}: -s {a.strip()} sets it to nothing; give at least one value{what}")


def parse_assignments(assignments: Sequence[str]) -> dict[str, object]:
    """The command line's ``-s axis=v1,v2`` list as typed axis values (the one reader of that spelling): an axis
    set twice or to nothing refused."""
    check_assignments(assignments)
    return dict(map(parse_assignment, assignments))


def override(exp: Experiment, values: Mapping[str, object]) -> Experiment:
    """The experiment with these axes set (values as an experiment file gives them: a list, or one value). Targets
    given (``archs``) re-target the PTX, cubin and library files too unless ``file_archs`` is given: the CLI's ``-s
    archs=sm_90a`` and ``api.sweep(archs="sm_90a")`` alike."""
    base = exp.axes()
    given = set(values)
    base.update(values)
    if "archs" in given and "file_archs" not in given and any(base[k] for k in ("ptx_files", "cubin_files",
                                                                                "lib_files")):
        base["file_archs"] = base["archs"]  # the targets asked for are the files' too (they'd keep their own)
    if "repeat" in given and "max_repeat" not in given and exp.max_repeat:
        try:  # -s repeat=N above the file's max_repeat: exactly N runs, as asked (both given: checked as given)
            if int(str(base["repeat"])) > exp.max_repeat:
                base["max_repeat"] = 0
        except ValueError:
            pass  # not a number: experiment_from_dict says so
    return experiment_from_dict(base)
