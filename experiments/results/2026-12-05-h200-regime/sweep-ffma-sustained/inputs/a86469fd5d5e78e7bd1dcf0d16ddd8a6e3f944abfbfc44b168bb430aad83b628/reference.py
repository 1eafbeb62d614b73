"""float64 references for the user-kernel examples: each takes the kernel's arguments by name."""


def matmul(A, B, **_):
    return A @ B
