"""One error hierarchy: every failure ptxprobe reports on purpose is a PtxprobeError."""

from __future__ import annotations


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
