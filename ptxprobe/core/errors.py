"""One error hierarchy: every failure ptxprobe reports on purpose is a PtxprobeError."""

from __future__ import annotations

import errno


class PtxprobeError(Exception):
    """Base of all errors ptxprobe raises for bad input or an unusable environment."""


class InvalidName(PtxprobeError):
    """A requested entry name is not a valid PTX identifier."""


class MalformedPtx(PtxprobeError):
    """PTX text that ptxprobe cannot interpret (no .version/.target, no entry, ...)."""


class ToolNotFound(PtxprobeError):
    """A required NVIDIA tool (ptxas, nvdisasm, cuobjdump, nvcc) is not available."""


class ToolFailed(PtxprobeError):
    """A tool ran but failed in a way that stops the current stage."""


class UnsupportedPtxVersion(PtxprobeError):
    """The PTX needs a newer ISA than the chosen ptxas understands."""


class CubinError(PtxprobeError):
    """A cubin could not be read (not ELF, truncated, no such kernel)."""


class SassParseError(PtxprobeError):
    """Disassembler output that does not have the expected shape."""


class SpecError(PtxprobeError):
    """A kernel spec, experiment file or sweep axis is invalid."""


class RunDirBusy(PtxprobeError):
    """Another ptxprobe process is writing this run directory."""


class DamagedLog(PtxprobeError):
    """A log line other than the last one is not valid JSON."""


class NoGpu(PtxprobeError):
    """A GPU stage was requested but no usable CUDA GPU is visible."""


class ToolMismatch(ToolNotFound):
    """A worker has no ptxas with the sha256 the plan names (another build at that path, or none)."""


class ClusterError(PtxprobeError):
    """The distributed executor cannot run: Ray missing, the cluster unreachable, or every worker for a job lost."""


class KernelCompileError(SpecError):
    """A user's kernel did not compile: the compiler's own reason and the offending source line (bad input)."""


class OutputUnwritable(SpecError):
    """An output path that cannot be written: read-only, not a directory, an existing file, no permission."""


class DiskFull(PtxprobeError):
    """The file system filled up while writing (the environment, not the input)."""


def output_failure(path, exc: OSError, what: str = "") -> PtxprobeError:
    """An OSError met while writing ``path`` (``what`` names it: "output directory ") as the error a user can act
    on: the path and the reason; a full disk is the environment (exit 3), any other refusal the output asked for."""
    where = exc.filename or path
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"cannot write {what}{where}: no space left on the device (free some, then run again)")
    return OutputUnwritable(f"cannot write {what}{where}: {exc.strerror or exc}")
