"""Find, identify and pin NVIDIA's ptxas / nvdisasm / cuobjdump / nvcc.

Sources, in order: triton's bundled tools, ptxprobe's own installs (pip wheels unpacked
into the cache), pip-installed ``nvidia-cuda-*`` wheels, ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``PATH``,
and ``/usr/local/cuda/bin`` (where the CUDA installer puts it).
Wrapper shell scripts are followed to the real binary, and every tool is identified by
version *and* sha256, because the cache and the manifest must name exact binaries.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ptxprobe.core.cache import Cache, atomic_write, default_root, sha256_file
from ptxprobe.core.errors import SpecError, ToolFailed, ToolNotFound
from ptxprobe.core.proc import run_tool
from ptxprobe.core.stages import stage_key
from ptxprobe.ptx.text import ptx_isa, with_version

KINDS = ("ptxas", "nvdisasm", "cuobjdump", "nvcc")
_VERSION_RE = re.compile(r"V(\d+\.\d+\.\d+)")


@dataclass(frozen=True)
class Tool:
    kind: str  # ptxas | nvdisasm | cuobjdump | nvcc
    path: str  # the real binary (wrappers followed)
    invoked: str  # what was found (may be a wrapper script)
    origin: str  # triton | triton-blackwell | pip:<dist> | ptxprobe-cache | CUDA_HOME | CUDA_PATH | PATH | DEFAULT_CUDA
    version: str  # e.g. 12.8.93
    sha256: str

    @property
    def release(self) -> tuple[int, int]:
        major, minor = self.version.split(".")[:2]
        return int(major), int(minor)

    def to_dict(self) -> dict:
        return asdict(self)


def version_key(version: str) -> tuple[int, ...]:
    """12.8.93 -> (12, 8, 93): release order, not string order (12.10 after 12.9)."""
    return tuple(int(x) for x in version.split(".") if x.isdigit())


def version_matches(version: str, spec: str) -> bool:
    """A release named exactly or by a prefix of whole fields (``12.8`` matches 12.8.93, not 12.80.1)."""
    return version == spec or version.startswith(spec + ".")


def follow_wrapper(path: str | os.PathLike, _depth: int = 0) -> Path:
    """Resolve symlinks and ``#!/bin/sh`` wrappers that ``exec`` another binary."""
    p = Path(path).resolve()
    if _depth > 8 or not p.is_file():
        return p
    with open(p, "rb") as f:
        head = f.read(4096)
    if not head.startswith(b"#!"):
        return p
    text = head.decode("utf-8", errors="replace")
    for line in text.splitlines()[1:]:
        m = re.match(r"\s*exec\s+(?:\"([^\"]+)\"|'([^']+)'|(\S+))", line)
        if m:
            target = next(g for g in m.groups() if g)
            target = os.path.expandvars(target)
            if not os.path.isabs(target):
                target = str(p.parent / target)
            if Path(target).is_file():  # only a wrapper if what it execs is a file we can point at
                return follow_wrapper(target, _depth + 1)
    return p


@functools.cache
def _identify_cached(real: str, mtime_ns: int, size: int, kind: str) -> tuple[str, str]:
    """Version and sha256, memoised in memory and on disk (hashing ~30 MB binaries is not free)."""
    cache = Cache()
    key = stage_key("tool-identity", path=real, mtime_ns=mtime_ns, size=size, kind=kind)
    rec = cache.get_json("tool-identity", key)
    if rec is not None:
        return rec["version"], rec["sha256"]
    run = run_tool([real, "--version"], timeout=60)
    m = _VERSION_RE.search(run.stdout + run.stderr)
    if not m:
        raise ToolNotFound(f"{real}: does not report a CUDA version ({run.describe()})")
    version, digest = m.group(1), sha256_file(real)
    cache.put_json("tool-identity", key, {"version": version, "sha256": digest})
    return version, digest


def identify(path: str | os.PathLike, kind: str, origin: str) -> Tool:
    """Version and sha256 of one tool (memoised on path, mtime and size)."""
    real = follow_wrapper(path)
    if not real.is_file() or not os.access(real, os.X_OK):
        raise ToolNotFound(f"{path}: not an executable file")
    st = real.stat()
    version, digest = _identify_cached(str(real), st.st_mtime_ns, st.st_size, kind)
    return Tool(kind, str(real), str(path), origin, version, digest)


def _triton_bin() -> Path | None:
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.origin:
        return None
    d = Path(spec.origin).parent / "backends" / "nvidia" / "bin"
    return d if d.is_dir() else None


def installed_root() -> Path:
    """Where ``ptxprobe toolchain install`` unpacks wheels (``PTXPROBE_TOOLCHAINS`` overrides)."""
    env = os.environ.get("PTXPROBE_TOOLCHAINS")
    return Path(env) if env else default_root() / "toolchains"


def wheel_roots() -> list[Path]:
    """The ``nvidia/`` folders of NVIDIA's pip wheels importable here (``nvidia/cu13/bin/ptxas``, ``…/nvcc``)."""
    return [nv for entry in sys.path if (nv := Path(entry) / "nvidia").is_dir()]


def _candidates() -> list[tuple[str, str, Path]]:
    """(kind, origin, path) of every place a tool may live."""
    found: list[tuple[str, str, Path]] = []
    tb = _triton_bin()
    if tb:
        found += [
            ("ptxas", "triton", tb / "ptxas"),
            ("ptxas", "triton-blackwell", tb / "ptxas-blackwell"),
            ("nvdisasm", "triton", tb / "nvdisasm"),
            ("cuobjdump", "triton", tb / "cuobjdump"),
        ]
    root = installed_root()
    if root.is_dir():
        for vdir in sorted(root.iterdir()):
            for kind in KINDS:
                found += [(kind, "ptxprobe-cache", p) for p in vdir.glob(f"**/bin/{kind}")]
    for nv in wheel_roots():
        for kind in KINDS:
            for p in nv.glob(f"*/bin/{kind}"):
                found.append((kind, f"pip:{p.parent.parent.name}", p))
    for var in CUDA_ROOT_VARS:
        if os.environ.get(var):
            found += [(kind, var, Path(os.environ[var]) / "bin" / kind) for kind in KINDS]
    for kind in KINDS:
        w = shutil.which(kind)
        if w:
            found.append((kind, "PATH", Path(w)))
    found += [(kind, DEFAULT_CUDA, Path(DEFAULT_CUDA) / "bin" / kind) for kind in KINDS]  # where CUDA installs
    return found


CUDA_ROOT_VARS = ("CUDA_HOME", "CUDA_PATH")
DEFAULT_CUDA = "/usr/local/cuda"


def discover(kinds: tuple[str, ...] = KINDS) -> list[Tool]:
    """Every distinct tool binary (by sha256), first origin wins, sorted by kind and version."""
    tools: dict[tuple[str, str], Tool] = {}
    for kind, origin, path in _candidates():
        if kind not in kinds or not path.exists():
            continue
        try:
            tool = identify(path, kind, origin)
        except ToolNotFound:
            continue
        tools.setdefault((kind, tool.sha256), tool)
    return sorted(tools.values(), key=lambda t: (t.kind, version_key(t.version), t.origin))


def arch_number(arch: str) -> int:
    m = re.fullmatch(r"sm_(\d+)[af]?", arch)
    if not m:
        raise ValueError(f"not a GPU arch: {arch!r} (expected e.g. sm_90a)")
    return int(m.group(1))


def arch_order(arch: str) -> tuple[int, str]:
    """sm_80 < sm_90 < sm_90a < sm_100a: by SM number, then the name (never as plain strings)."""
    digits = "".join(c for c in arch if c.isdigit())
    return (int(digits or 0), arch)


def triton_ptxas(arch: str, tools: list[Tool] | None = None) -> Tool:
    """The ptxas Triton itself would use for this arch (``ptxas-blackwell`` from sm_100 on; Triton 3.5 and older
    ship one ptxas for every arch)."""
    tools = tools if tools is not None else discover(("ptxas",))
    want = "triton-blackwell" if arch_number(arch) >= 100 else "triton"
    for origin in dict.fromkeys((want, "triton")):
        for t in tools:
            if t.kind == "ptxas" and t.origin == origin:
                return t
    raise ToolNotFound(f"triton's bundled ptxas for {arch} ({want}) not found: is triton installed?")


def nvcc_ptxas() -> Tool:
    """The ptxas of the CUDA toolkit whose nvcc compiles ``.cu`` sources: the PTX it emits is that ptxas's own."""
    nvcc = find_tool("nvcc")
    path = Path(nvcc.path).parent / "ptxas"
    if not path.exists():
        raise ToolNotFound(f"no ptxas beside {nvcc.path} (CUDA {nvcc.version}): name one with -s ptxas=VERSION|PATH")
    return identify(path, "ptxas", "nvcc")


def select_ptxas(arch: str, spec: str, tools: list[Tool] | None = None) -> list[Tool]:
    """Resolve one ``--ptxas`` entry: ``triton``, ``nvcc`` (the toolkit that compiles ``.cu`` files), ``all``,
    ``newest``, a version prefix or a path."""
    tools = tools if tools is not None else discover(("ptxas",))
    ptxases = [t for t in tools if t.kind == "ptxas"]
    if spec == "triton":
        return [triton_ptxas(arch, tools)]
    if spec == "nvcc":
        return [nvcc_ptxas()]
    if spec == "all":
        return [t for t in ptxases if supports_arch(t, arch)]
    if spec == "newest":
        ok = [t for t in ptxases if supports_arch(t, arch)]
        if not ok:
            raise ToolNotFound(f"no ptxas supports {arch}")
        return [ok[-1]]
    if os.sep in spec or Path(spec).exists():
        return [identify(spec, "ptxas", "user")]
    matches = [t for t in ptxases if version_matches(t.version, spec)]
    if not matches:
        have = ", ".join(sorted({t.version for t in ptxases})) or "none"
        raise ToolNotFound(f"no ptxas {spec} found (have: {have}); try `ptxprobe toolchain install {spec}`")
    # a prefix (12.6) means the newest release of it, as `toolchain install 12.6` installs every one; the same
    # release found in several places: the first found (discovery's order of preference)
    newest = max(matches, key=lambda t: version_key(t.version))
    return [next(t for t in matches if t.version == newest.version)]


def find_tool(kind: str, prefer_version: str | None = None, tools: list[Tool] | None = None) -> Tool:
    """A tool of this kind, the closest to ``prefer_version`` (else the newest)."""
    tools = [t for t in (tools if tools is not None else discover((kind,))) if t.kind == kind]
    if not tools:
        raise ToolNotFound(f"no {kind} found (looked in Triton's bundled tools, pip wheels, $CUDA_HOME/bin, "
                           f"$CUDA_PATH/bin, PATH and {DEFAULT_CUDA}/bin): install the CUDA toolkit, or point at one "
                           f"with CUDA_HOME=/path/to/cuda (its bin/ holds {kind})")
    if prefer_version:
        same = [t for t in tools if t.release == tuple(int(x) for x in prefer_version.split(".")[:2])]
        if same:
            return same[-1]
    return tools[-1]


# --- what a ptxas accepts, discovered by asking it (cached per sha256) -------------------

_PROBE_PTX = """.version {version}
.target {arch}
.address_size 64
.visible .entry ptxprobe_probe()
{{
\tret;
}}
"""
_CURRENT_RE = re.compile(r"current version is '(\d+\.\d+)'")


def _probe(tool: Tool, version: str, arch: str, timeout: float = 60.0):
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "probe.ptx"
        src.write_text(_PROBE_PTX.format(version=version, arch=arch))
        return run_tool([tool.path, f"-arch={arch}", str(src), "-o", str(Path(d) / "probe.cubin")], timeout=timeout)


def _capabilities_key(tool: Tool) -> str:
    return stage_key("ptxas-capabilities", ptxas=tool.sha256)


def _capabilities(tool: Tool, timeout: float = 60.0) -> dict:
    """What this ptxas accepts, learnt by asking it; a probe that hangs or crashes is not cached."""
    cache = Cache()
    rec = cache.get_json("ptxas-capabilities", _capabilities_key(tool))
    if rec is not None:
        return rec
    run = _probe(tool, "99.9", "sm_80", timeout)
    m = _CURRENT_RE.search(run.stderr + run.stdout)
    max_isa = m.group(1) if m else "99.9"  # unknown: never lower, let ptxas itself say no
    rec = {"max_ptx_isa": max_isa, "archs": {}}
    if run.status in ("ok", "failed"):
        cache.put_json("ptxas-capabilities", _capabilities_key(tool), rec)
    return rec


def max_ptx_isa(tool: Tool, timeout: float = 60.0) -> tuple[int, int]:
    major, minor = _capabilities(tool, timeout)["max_ptx_isa"].split(".")
    return int(major), int(minor)


def supports_arch(tool: Tool, arch: str, timeout: float = 60.0) -> bool:
    """Ask ptxas to assemble an empty kernel for ``arch`` (cached; a probe that hangs or crashes is not)."""
    rec = _capabilities(tool, timeout)
    if arch not in rec["archs"]:
        isa = "{}.{}".format(*max_ptx_isa(tool, timeout))
        run = _probe(tool, isa, arch, timeout)
        if run.status not in ("ok", "failed"):  # a hang or crash says nothing about the arch: not cached
            raise ToolFailed(f"ptxas {tool.version} could not be asked about {arch}: {run.describe()}")
        rec["archs"][arch] = run.ok
        Cache().put_json("ptxas-capabilities", _capabilities_key(tool), rec)
    return bool(rec["archs"][arch])


_HELP_OPTION_RE = re.compile(r"^(--[A-Za-z][\w-]*)(?:\s+<[^>]*>)?\s+\((-[A-Za-z][\w-]*)\)", re.M)


def ptxas_options(tool: Tool, timeout: float = 30.0) -> dict | None:
    """The options this ptxas accepts, learnt from its own ``--help`` (long and short spellings; cached by sha256).

    None when its ``--help`` lists nothing (it crashed or hung): then nothing is checked and ptxas itself says no.
    """
    cache = Cache()
    key = stage_key("ptxas-options", ptxas=tool.sha256)
    rec = cache.get_json("ptxas-options", key)
    if rec is None:
        run = run_tool([tool.path, "--help"], timeout=timeout)
        pairs = _HELP_OPTION_RE.findall(run.stdout + run.stderr)
        if not pairs:
            return None
        rec = {"long": sorted({a for a, _ in pairs}), "short": sorted({b for _, b in pairs})}
        cache.put_json("ptxas-options", key, rec)
    return rec


EVERY_PTXAS = frozenset({"-lineinfo", "-O0", "-O1", "-O2", "-O3"})  # in every release's --help: no need to ask


def unsupported_flags(tool: Tool, flags: tuple[str, ...]) -> list[str]:
    """The flags (not their values) this ptxas's ``--help`` does not list: ``--x=1``, ``-O2`` (``-O``), ``-foo``."""
    if EVERY_PTXAS.issuperset(flags):
        return []
    opts = ptxas_options(tool)
    if opts is None:
        return []
    long, short = set(opts["long"]), set(opts["short"])
    bad = []
    for f in flags:
        if not f.startswith("-"):
            continue  # the value of the option before it
        name = f.split("=", 1)[0]
        if name.startswith("--"):
            ok = name in long
        else:
            ok = name in short or any(name.startswith(s) and len(s) == 2 for s in short)  # -O2 is -O with 2
        if not ok:
            bad.append(name)
    return bad


def fit_ptx_version(ptx: str, tool: Tool, timeout: float = 60.0) -> tuple[str, str | None]:
    """Lower ``.version`` to what ``tool`` accepts; returns (ptx, note or None).

    Lowering is only a first attempt: if the PTX uses a feature of the newer ISA, ptxas
    rejects it and assemble() turns that into UnsupportedPtxVersion with ptxas's reason.
    """
    have = ptx_isa(ptx)
    top = max_ptx_isa(tool, timeout)
    if have <= top:
        return ptx, None
    new = with_version(ptx, top)
    return new, f"lowered .version {have[0]}.{have[1]} -> {top[0]}.{top[1]} for ptxas {tool.version}"


# --- installing other versions from pip wheels -----------------------------------------

# every CUDA release whose ptxas is on PyPI: nvidia-cuda-nvcc-cu12 (12.x), nvidia-cuda-nvcc (13.x)
RELEASES = ("12.0.76", "12.0.140", "12.1.66", "12.1.105", "12.2.91", "12.2.128", "12.2.140", "12.3.52", "12.3.103",
            "12.3.107", "12.4.99", "12.4.131", "12.5.40", "12.5.82", "12.6.20", "12.6.68", "12.6.77", "12.6.85",
            "12.8.61", "12.8.93", "12.9.41", "12.9.86", "13.0.48", "13.0.88", "13.1.80", "13.1.115", "13.2.51",
            "13.2.78", "13.2.86", "13.3.33", "13.3.73", "13.4.59", "13.4.92", "13.5.37")


def expand_versions(versions: list[str]) -> list[str]:
    """``all`` is every release in RELEASES; a prefix (``12.8``) the releases it names; a full version itself."""
    out: list[str] = []
    for v in versions:
        if v == "all":
            out += list(RELEASES)
        elif v.count(".") == 1 and any(version_matches(r, v) for r in RELEASES):
            out += [r for r in RELEASES if version_matches(r, v)]
        else:
            out.append(v)
    return list(dict.fromkeys(out))


WHEELS = {
    "ptxas": ("nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvcc"),
    "nvdisasm": ("nvidia-cuda-nvdisasm-cu12", "nvidia-cuda-nvdisasm"),
    "cuobjdump": ("nvidia-cuda-cuobjdump-cu12", "nvidia-cuda-cuobjdump"),
}


@dataclass(frozen=True)
class Installed:
    kind: str
    version: str
    dist: str
    wheel: str
    wheel_sha256: str
    path: str
    sha256: str


CUDA_RELEASE = r"1[2-9]\.\d+(\.\d+)?"  # a CUDA release that has pip wheels, as given (12.6, 12.4.131)


def install(version: str, kinds: tuple[str, ...] = ("ptxas",), dest: Path | None = None) -> list[Installed]:
    """Fetch the wheels of a CUDA release with pip and unpack just the tools into the cache."""
    if not re.fullmatch(CUDA_RELEASE, version):
        raise SpecError(f"not a CUDA release: {version!r} (e.g. 12.4.131, 12.6 or 13.0.88; 12.0 and later)")
    bad = [k for k in kinds if k not in WHEELS]
    if bad:
        raise SpecError(f"cannot install {', '.join(bad)} from wheels (can: {', '.join(WHEELS)})")
    dest = dest or installed_root()
    major = int(version.split(".")[0])
    out: list[Installed] = []
    for kind in kinds:
        dist = WHEELS[kind][0 if major == 12 else 1]
        target = dest / f"{dist}-{version}"
        manifest = target / "installed.json"
        if manifest.exists():
            out.append(Installed(**json.loads(manifest.read_text())))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            spec = f"{dist}=={version}" if version.count(".") >= 2 else f"{dist}=={version}.*"
            run = run_tool(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--platform",
                    "manylinux2014_x86_64",
                    "--platform",
                    "manylinux_2_17_x86_64",
                    "--platform",
                    "manylinux_2_27_x86_64",
                    "--platform",
                    "manylinux_2_28_x86_64",
                    "-d",
                    tmp,
                    spec,
                ],
                timeout=900,
            )
            wheels = list(Path(tmp).glob("*.whl"))
            if not run.ok or not wheels:
                raise ToolNotFound(f"could not download {spec}: {run.describe()}")
            wheel = wheels[0]
            with zipfile.ZipFile(wheel) as zf:
                members = [n for n in zf.namelist() if n.endswith(f"/bin/{kind}")]
                if not members:
                    raise ToolNotFound(f"{wheel.name} has no bin/{kind}")
                data = zf.read(members[0])
            binary = target / "bin" / kind
            atomic_write(binary, data)
            binary.chmod(0o755)
            tool = identify(binary, kind, "ptxprobe-cache")
            rec = Installed(kind, tool.version, dist, wheel.name, sha256_file(wheel), str(binary), tool.sha256)
            atomic_write(manifest, json.dumps(asdict(rec), indent=1).encode())
            out.append(rec)
    return out
