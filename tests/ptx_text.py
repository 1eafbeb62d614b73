"""Test helpers for PTX text: a small kernel of our own, and two emissions of one kernel compared as text."""

import re

_COMMENT_RE = re.compile(r"//.*$", re.MULTILINE)
_FILE_RE = re.compile(r'^(\s*\.file\s+\d+\s+)"[^"]*"(.*)$', re.MULTILINE)


def normalize(ptx: str) -> str:
    """Drop what may differ between two emissions of one kernel: comments, ``.file`` paths, blank space."""
    text = _COMMENT_RE.sub("", ptx)
    text = _FILE_RE.sub(lambda m: f'{m.group(1)}"<file>"', text)
    return "\n".join(ln.rstrip() for ln in text.splitlines() if ln.strip())


# axpy: x[i] = x[i] * a + x[i], one thread per element (sm_90a, PTX ISA 8.0: every ptxas from 12.0 on takes it)
AXPY_PTX = """.version 8.0
.target sm_90a
.address_size 64

.visible .entry axpy(
	.param .u64 axpy_param_0,
	.param .f32 axpy_param_1
)
{
	.reg .b32 	%r<3>;
	.reg .f32 	%f<4>;
	.reg .b64 	%rd<4>;
	ld.param.u64 	%rd1, [axpy_param_0];
	ld.param.f32 	%f1, [axpy_param_1];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd2, %rd2, %rd3;
	ld.global.f32 	%f2, [%rd2];
	fma.rn.f32 	%f3, %f2, %f1, %f2;
	st.global.f32 	[%rd2], %f3;
	ret;
}
"""


# a Triton program's start that compiles one small kernel ahead of time for sm_90a (no GPU needed): the programs
# tests write around it end with what they do with ``k``
SCALE_KERNEL_PROGRAM = """import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=m) * 2.0, mask=m)

sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
k = triton.compile(ASTSource(scale_kernel, sig, constexprs={"BLOCK": 256}), target=GPUTarget("cuda", 90, 32))
"""


# a CuTe DSL kernel and the host function that launches it, for the programs the CuTe DSL tests write around it (the
# stream is typed so that ``export_to_c`` can write the host function's C signature); the DSL compiles it for the GPU
# it finds, or for CUTE_DSL_ARCH without one
CUTE_SCALE_KERNEL = """import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute


@cute.kernel
def scale_kernel(g_in: cute.Tensor, g_out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 128 + tidx
    g_out[i] = g_in[i] * 2.0


@cute.jit
def scale(m_in: cute.Tensor, m_out: cute.Tensor, stream: cuda.CUstream):
    scale_kernel(m_in, m_out).launch(grid=(32, 1, 1), block=(128, 1, 1), stream=stream)
"""


# A .const array the kernel reads (ptxas puts it in the module's constant bank 3: the instructions read
# c[0x3][...], so only the bank's contents tell two initialisers apart), and a device function it calls.
HEAD = """.version 8.0
.target sm_90a
.address_size 64

.const .align 4 .b32 coeffs[4] = {COEFFS};

.func (.reg .f32 out) scale(.reg .f32 x)
{
	.reg .f32 %f<3>;
	mul.rn.f32 %f1, x, SCALE;
	ld.const.f32 %f2, [coeffs+4];
	add.rn.f32 out, %f1, %f2;
	ret;
}
"""
ENTRY = """
.visible .entry NAME(
	.param .u64 NAME_param_0,
	.param .f32 NAME_param_1
)
{
	.reg .b32 	%r<3>;
	.reg .f32 	%f<6>;
	.reg .b64 	%rd<4>;
	ld.param.u64 	%rd1, [NAME_param_0];
	ld.param.f32 	%f1, [NAME_param_1];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd2, %rd2, %rd3;
	ld.global.f32 	%f2, [%rd2];
	call.uni (%f4), scale, (%f2);
	ld.const.f32 	%f5, [coeffs+8];
	fma.rn.f32 	%f3, %f4, %f1, %f5;
	st.global.f32 	[%rd2], %f3;
	ret;
}
"""
OTHER = """
.visible .entry bxpy(
	.param .u64 bxpy_param_0
)
{
	.reg .b32 	%r<2>;
	.reg .f32 	%f<3>;
	.reg .b64 	%rd<4>;
	ld.param.u64 	%rd1, [bxpy_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd2, %rd2, %rd3;
	ld.global.f32 	%f1, [%rd2];
	ld.const.f32 	%f2, [coeffs];
	mul.rn.f32 	%f1, %f1, %f2;
	st.global.f32 	[%rd2], %f1;
	ret;
}
"""


def calling_ptx(coeffs: str = "10, 20, 30, 40", scale: str = "0f40000000", other: bool = False) -> str:
    text = HEAD.replace("COEFFS", coeffs).replace("SCALE", scale) + ENTRY.replace("NAME", "axpy")
    return text + OTHER if other else text


def module_with_trigger(spelling: str = "cutlass") -> str:
    """The calling kernel whose callee and constant array hold the trigger in their names (as CUTLASS's do)."""
    return calling_ptx().replace("scale", f"{spelling}_scale").replace("coeffs", f"{spelling}_coeffs")
