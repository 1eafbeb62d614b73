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
