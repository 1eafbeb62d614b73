"""What remains of a kernel, said in words: instruction classes, loops (and inline-asm wait loops) and what they
hold, the declarations left. ``reduce.json`` carries it for the input and for the minimal kernel."""

from __future__ import annotations

import re
from collections import Counter

from ptxprobe.reduce.ptxbody import LABEL_RE, Body, Stmt, code_of, loops, parse


def instruction_class(opcode: str) -> str:
    """``fma.rn.f32`` -> ``fma.f32``, ``ld.shared.v4.f32`` -> ``ld.shared``: the class a reader names."""
    parts = opcode.split(".")
    root = parts[0]
    if root in ("ld", "st", "atom", "red", "cp", "ldmatrix", "stmatrix") and len(parts) > 1:
        space = next((p for p in parts[1:] if p in ("global", "shared", "local", "param", "const", "async",
                                                     "bulk")), "")
        return f"{root}.{space}" if space else root
    if root in ("tcgen05", "wgmma", "mbarrier", "mma", "wmma") and len(parts) > 1:
        kind = next((p.replace("kind::", "") for p in parts if p.startswith("kind::")), "")
        return ".".join(x for x in (root, parts[1], kind) if x)
    types = [p for p in parts[1:] if re.fullmatch(r"[fbsu](?:8|16|32|64)(?:x2)?|bf16(?:x2)?|e[45]m[23]|pred", p)]
    return f"{root}.{types[-1]}" if types else root


GUARDED = re.compile(r"^@!?[\w$%]+\s+")  # inside asm a guard may name a scoped predicate without %
TENSOR_ROOTS = ("tcgen05", "wgmma", "mma", "wmma", "ldmatrix", "stmatrix", "cp", "fma", "mbarrier")


def _notable(classes: Counter, most: int = 5) -> str:
    """The classes a reader looks for first (tensor cores, async copies, FMAs), then the most frequent; how many
    more there are, so that a list of five is never read as all of six."""
    order = [kv for kv in sorted(classes.items(), key=lambda kv: (kv[0].split(".")[0] not in TENSOR_ROOTS, -kv[1],
                                                                  kv[0])) if kv[1] > 0]
    more = f", {len(order) - most} more classes" if len(order) > most else ""
    return ", ".join(f"{c} x{n}" for c, n in order[:most]) + more


def counted(n: int, what: str = "instruction") -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def asm_loop(body: Body, block: Stmt) -> list[str]:
    """The opcodes of a ``{ }`` scope that branches back to a label of its own (a wait loop), else []."""
    code = [code_of(body.lines[k]) for k in block.lines]
    labels = {m.group(1) for c in code if (m := LABEL_RE.match(c))}
    ops = [re.split(r"\s+", GUARDED.sub("", c), maxsplit=1)[0] for c in code
           if c and not c.startswith(("{", "}", ".")) and not LABEL_RE.match(c)]
    loops_back = any(re.search(r"\bbra(?:\.uni)?\s+(" + "|".join(map(re.escape, labels)) + r")\s*;", c)
                     for c in code) if labels else False
    return ops if loops_back else []


def structure(ptx: str, entry: str) -> dict:
    """What remains of a kernel: instruction classes, where loops are and what they hold, declarations left."""
    body = parse(ptx, entry)
    instrs = body.instructions()
    classes = Counter(instruction_class(s.opcode) if s.kind == "instr" else "inline asm" for s in instrs)
    in_loops = []
    for a, b in loops(body):
        inside = [s for s in body.stmts[a:b + 1] if s.kind in ("instr", "block")]
        in_loops.append({"instructions": len(inside),
                         "classes": dict(Counter(instruction_class(s.opcode) if s.kind == "instr" else "inline asm"
                                                 for s in inside).most_common())})
    decls = Counter(d.kind for d in body.decls if d.kind != "reg")
    asm_loops = [asm_loop(body, s) for s in instrs if s.kind == "block"]
    asm_loops = [x for x in asm_loops if x]
    words = [f"an inline-asm loop ({', '.join(x)})" for x in asm_loops]
    for lp in in_loops:
        top = _notable(Counter(lp["classes"]))
        words.append(f"a loop of {counted(lp['instructions'])} ({top})")
    outside = len(instrs) - sum(lp["instructions"] for lp in in_loops)
    if outside > 0:
        rest = classes - sum((Counter(lp["classes"]) for lp in in_loops), Counter())
        words.append(f"{counted(outside)} outside loops ({_notable(rest)})")
    return {
        "instructions": len(instrs),
        "lines": len(body.lines),
        "classes": dict(classes.most_common()),
        "loops": in_loops,
        "asm_loops": asm_loops,
        "labels": sum(1 for s in body.stmts if s.kind == "label"),
        "parameters": decls.get("param", 0),
        "buffers": decls.get("symbol", 0),
        "device_functions": decls.get("func", 0),
        "in_words": "; ".join(words) or "no instructions",
    }
