"""The answer of ``tune``: per kernel the best configuration, its gain over the user's with an interval, the
runner-up, what was pruned and why, GPU seconds; ``DIR/tuned.json`` and the one-line source change. Pure.

The race chooses: a candidate it finds ``faster`` (``stats.decide`` with the ±0.5 % margin, Benjamini-Hochberg over
every candidate raced); among those it could not tell from its leader, the one with the fewest changes (a rename or
an option before another ptxas release), the fastest estimate kept beside it (``prefer="fastest"`` takes the
leader). The proof decides (``tune.proof``): the choice timed again on fresh rounds is recommended only when they
say ``faster``, and its gain is theirs (``gain``; the race's own numbers, biased by the choosing, stay under
``race_choice``). Otherwise yours stays and the record says why: nothing the race found faster (the leader's
verdict), or the choice not confirmed (``proof``: its verdict on the fresh rounds, or ``slower``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ptxprobe.core.errors import SpecError
from ptxprobe.records.tuned import TunedDocument, TunedKernel
from ptxprobe.stats import paired as stats
from ptxprobe.stats.regime import Regime
from ptxprobe.tune.proof import CONFIRMED, REFUTED, UNCONFIRMED, Proof, outcome_of_verdict
from ptxprobe.tune.prune import SAME_CODE_AS, Candidate, Pruned
from ptxprobe.tune.race import ALONE, INTERRUPTED, RaceResult, Standing

TUNED = TunedDocument.FILE
NUMERICS_MODES = ("bitwise", "tolerance")
TUNED_STATUS, STATIC_ONLY = "tuned", "static-only"
NUMERICS_FAILED = "numerics"
# a raced kernel's ``outcome``: the proof's (CONFIRMED, UNCONFIRMED, REFUTED), or why none ran
NOTHING_FASTER, UNPROVEN = "nothing faster", "unproven"  # the race found nothing faster; its proof did not finish
OUTCOMES = (CONFIRMED, UNCONFIRMED, REFUTED, NOTHING_FASTER, UNPROVEN)


def passes_numerics(rec: dict, base: dict, mode: str, tolerance: float | None) -> tuple[bool, str]:
    """Whether a candidate's outputs pass the gate: never more NaN/Inf than the user's configuration, every output
    written, and bitwise equal to the user's outputs (where your configuration is not bitwise equal to itself run
    again on the same inputs, a nondeterministic kernel: within that spread, ``within_baseline_spread``), or
    (``tolerance``) within the kernel's stated tolerance of the float64 reference (bitwise when the kernel states
    none)."""
    if rec["nan_count"] > base["nan_count"] or rec["inf_count"] > base["inf_count"]:
        return False, f"more NaN/Inf than yours ({rec['nan_count']} NaN, {rec['inf_count']} Inf)"
    if not rec["fully_written"]:
        return False, "left outputs unwritten"
    if mode == "tolerance" and tolerance is not None and rec.get("passes_tolerance") is not None:
        ok = bool(rec["passes_tolerance"])
        return ok, "" if ok else f"relative error {rec['rel_err_vs_reference']:.3g} above the tolerance {tolerance}"
    if not rec["bitwise_equal_to_baseline"] and not rec.get("within_baseline_spread"):
        own = (f"; yours differs from itself by up to {rec['baseline_self_max_ulp']} ULP"
               if rec.get("baseline_deterministic") is False else "")
        return False, (f"not bitwise equal to yours ({rec['n_diff_vs_baseline']} elements differ, max ULP "
                       f"{rec['max_ulp_vs_baseline']}{own})")
    return True, ""


def static_answer(pruned: Pruned, target: dict | None = None) -> dict:
    """A kernel pruned statically, not timed: the distinct codes a GPU would race."""
    return {"kernel": pruned.kernel, "arch": pruned.arch, "status": STATIC_ONLY, **(target or {}),
            "user": pruned.user.to_json() if pruned.user else None, "best": None, "best_is_yours": None,
            "gain": None, "runner_up": None, "distinct": [c.to_json() for c in pruned.distinct],
            "pruned": [p.to_json() for p in pruned.pruned], "race": None, "gpu_seconds": 0.0}


def change_cost(cand: Candidate, user: Candidate) -> int:
    """How far a configuration is from the user's: a rename and an option are each one local change, another ptxas
    release two (it is program-wide: ``TRITON_PTXAS_PATH``, another CUDA toolkit)."""
    return ((cand.name != user.name) + bool(cand.options) + 2 * (cand.ptxas_sha256 != user.ptxas_sha256))


def chosen(result: RaceResult, by_label: dict[str, Candidate], user: Candidate, prefer: str) -> Standing | None:
    """The configuration to recommend: the race's winner, or with ``simplest`` the configuration with the fewest
    changes among those the race could not tell from it (``RaceResult.tied_with_winner``), the faster on a tie."""
    tied = result.tied_with_winner()
    if not tied or prefer == "fastest":
        return result.winner
    return min(tied, key=lambda s: (change_cost(by_label[s.label], user), -s.ratio))


def kernel_answer(pruned: Pruned, result: RaceResult, *, nums: dict, gate: dict[str, str], numerics: str,
                  gpu_seconds: float, wall_seconds: float, target: dict, prefer: str = "simplest",
                  proof: Proof | None = None, proof_interrupted: bool = False, regime: Regime | None = None) -> dict:
    """One kernel's tuned record from its pruning, numerics gate (label -> why it failed), race and the proof of
    the race's choice (None: no choice, or no proof finished; ``proof_interrupted``: an interrupt cut it), and the
    regime the proof's rounds ran in (its clock, throttling, power and clock slope: the gain's conditions)."""
    by_label = {c.label: c for c in pruned.distinct}
    standings = {s.label: s for s in result.standings}
    choice = chosen(result, by_label, pruned.user, prefer)
    if proof is not None and (choice is None or proof.label != choice.label):
        raise ValueError(f"the proof timed {proof.label}, the race chose {choice.label if choice else 'nothing'}")
    winner = choice if proof is not None and proof.outcome == CONFIRMED else None
    best = by_label[winner.label] if winner else pruned.user
    if winner:
        rest = [s for s in result.standings if s.label != winner.label]
        runner = rest[0] if rest else max((d.standing for d in result.dropped), key=lambda s: s.ratio, default=None)
    else:
        runner = result.leader
    out_of_gate = [{**by_label[label].to_json(), "reason": NUMERICS_FAILED, "representative": None, "detail": why}
                   for label, why in gate.items()]
    rec = {
        "kernel": pruned.kernel, "arch": pruned.arch, "status": TUNED_STATUS, **target, "numerics": numerics,
        "user": pruned.user.to_json(), "best": best.to_json(), "best_is_yours": winner is None,
        "gain": proof.to_json() if winner and proof else None,
        "outcome": proof.outcome if proof else (UNPROVEN if choice else NOTHING_FASTER),
        "race_choice": {**by_label[choice.label].to_json(), **choice.to_json()} if choice else None,
        "proof": proof.to_json() if proof else None, "proof_interrupted": proof_interrupted,
        "regime": regime.fields() if regime else None,
        "runner_up": ({**by_label[runner.label].to_json(), **runner.to_json()} if runner else None),
        "leader_verdict": result.leader.verdict if result.leader else None,
        "prefer": prefer,
        "fastest": ({**by_label[result.winner.label].to_json(), **result.winner.to_json()}
                    if winner is not None and result.winner is not None and winner.label != result.winner.label
                    else None),  # the fastest estimate, when the simpler choice was tied with it
        "tied": [s.label for s in result.tied_with_winner()],
        "distinct": [{**c.to_json(), "numerics": nums.get(c.label), **({"standing": standings[c.label].to_json()}
                                                                         if c.label in standings else {})}
                     for c in pruned.distinct],
        "pruned": [p.to_json() for p in pruned.pruned] + out_of_gate,
        "race": result.to_json(), "gpu_seconds": gpu_seconds, "wall_seconds": wall_seconds,
    }
    rec["change"] = source_change(rec)
    return rec


def across_problems(records: list[dict]) -> dict:
    """One configuration for a kernel tuned at several problems (sizes): the one every problem's proof confirmed,
    its gain the problem where it gains least (``gain``, the worst size; each problem's under ``across``); where
    the problems' answers differ, yours stays (no configuration was confirmed at every problem: a proof confirms
    only its own problem's choice)."""
    first = records[0]
    if len(records) == 1:
        return first
    across = [{"group_id": r.get("group_id"), "best": r["best"]["label"], "gain": r.get("gain")} for r in records]
    if len({r["best"]["label"] for r in records}) == 1:
        gains = [r["gain"] for r in records if r.get("gain")]
        worst = min(gains, key=lambda g: g["ratio"]) if gains else None
        return {**first, "gain": worst, "across": across}
    said = ", ".join(f"{a['best']} at {a['group_id']}" for a in across)
    return {**first, "best": first["user"], "best_is_yours": True, "gain": None, "across": across,
            "change": f"none: the problems' answers differ ({said}); no configuration was confirmed at every "
                      "problem, so yours stays"}


def source_change(rec: dict) -> str:
    """The one-line change that applies the best configuration to the user's source, where there is one."""
    best, user = rec.get("best"), rec.get("user")
    if (rec.get("race") or {}).get("stopped_by") == ALONE:
        left = Counter(p["reason"] for p in rec.get("pruned", []) if p["reason"] != SAME_CODE_AS)
        if not left:
            return "none: every configuration tried gives your machine code"
        return ("none: every other configuration that could be timed gives your machine code ("
                + ", ".join(f"{n} {reason}" for reason, n in sorted(left.items())) + ")")
    if not best or rec.get("best_is_yours"):
        return unchanged_because(rec)
    name = best["name"]
    same_ptxas = best["ptxas_sha256"] == user["ptxas_sha256"]
    options = " ".join(best["options"])
    frontend = rec.get("frontend") or rec.get("source_kind") or ""
    renamed = name != user["name"]
    if frontend in ("triton", "gluon") or rec.get("source_kind") == "triton":
        jit = "gluon.jit" if frontend == "gluon" else "triton.jit"
        parts = [f"@{jit}(repr=lambda _: {name!r}) (or name the function {name})"] if renamed else []
        if not same_ptxas:
            parts.append(f"TRITON_PTXAS_PATH=<ptxas {best['ptxas_version']}> (program-wide)")
        if options:
            parts.append(f"launch with ptx_options={options!r}")
        return "; ".join(parts)
    if frontend == "cute-dsl":  # the DSL names every kernel itself (kernel_cutlass_...): no source line gives it
        what = ", ".join(x for x in (f"the code of {name[:60]}" if renamed else "",
                                    f"ptxas {best['ptxas_version']}" if not same_ptxas else "",
                                    options) if x)
        return (f"run it, or export_to_c it, under `ptxprobe apply DIR -- CMD` ({what}, loaded under the DSL's own "
                "name)")
    parts = [f"name the kernel {name} (the symbol ptxas sees)"] if renamed else []
    if not same_ptxas or options:
        xptxas = f" -Xptxas {','.join(best['options'])}" if options else ""
        parts.append(f"build with ptxas {best['ptxas_version']} (CUDA {'.'.join(best['ptxas_version'].split('.')[:2])})"
                     f"{xptxas}")
    return "; ".join(parts)


def interrupted(rec: dict) -> bool:
    """Whether an interrupt ended this kernel's race or its proof: the tune stops after it."""
    return (rec.get("race") or {}).get("stopped_by") == INTERRUPTED or bool(rec.get("proof_interrupted"))


def adjusted_over_kernels(records: list[dict], margin: float) -> list[dict]:
    """A program tune's kernels are one family (the question is whether any change helps the program): each
    proof's verdict is taken again with its Benjamini-Hochberg q-value over the proofs of all the kernels, and a
    choice confirmed alone but not under the adjustment keeps yours (``outcome`` unconfirmed). One proof: as it
    was."""
    proven = [i for i, r in enumerate(records) if r.get("proof")]
    if len(proven) < 2:
        return records
    q = stats.bh_qvalues([records[i]["proof"]["p_value"] for i in proven])
    out = list(records)
    for i, qv in zip(proven, q, strict=True):
        g = records[i]["proof"]
        verdict = stats.decide(stats.Interval(g["ratio"], g["low"], g["high"], g["level"]), margin, qv)
        proof = {**g, "q_value": qv, "verdict": verdict, "multiplicity": f"bh over {len(proven)} kernels' proofs",
                 "outcome": outcome_of_verdict(verdict)}
        rec = {**records[i], "proof": proof, "outcome": proof["outcome"]}
        if proof["outcome"] != CONFIRMED and not rec["best_is_yours"]:
            rec.update(best=rec["user"], best_is_yours=True, gain=None)
            rec["change"] = unchanged_because(rec)
        elif proof["outcome"] == CONFIRMED and rec.get("gain"):
            rec["gain"] = proof
        out[i] = rec
    return out


def unchanged_because(rec: dict) -> str:
    """Why a raced kernel keeps your configuration, in one line: nothing raced faster, or the choice's proof."""
    choice, proof = rec.get("race_choice"), rec.get("proof")
    if proof:
        return (f"none: the race's choice {choice['label']} was {'slower' if proof['outcome'] == REFUTED else 'not'}"
                f"{'' if proof['outcome'] == REFUTED else ' confirmed'} on {proof['rounds']} fresh rounds "
                f"({proof['verdict']}, {proof['ratio']:.4f} [{proof['low']:.4f}, {proof['high']:.4f}]); yours stays")
    if choice:
        return f"none: the race's choice {choice['label']} was not proven (its proof did not finish); yours stays"
    return "none: no configuration raced faster than yours beyond the margin; yours stays"


def outcome_of(doc: TunedDocument) -> str | None:
    """The tune's answer over its kernels, for the exit code: ``confirmed`` where any kernel's choice was confirmed,
    else ``slower`` where a proof found the choice slower, else ``unconfirmed`` where one was not confirmed (or did
    not finish), else None (nothing raced faster, or nothing raced)."""
    # records before the proof name no outcome: a recommendation as they made it stands for one
    said = {k.outcome or (CONFIRMED if k.best_is_yours is False else None) for k in doc.kernels}
    if CONFIRMED in said:
        return CONFIRMED
    if REFUTED in said:
        return REFUTED
    return UNCONFIRMED if said & {UNCONFIRMED, UNPROVEN} else None


def document(kernels: list[dict], *, space: dict, ptxas: dict, gpu: dict | None, static_dir: str, note: str,
             race_plan: dict | None, argv: list[str], numerics: str, program: dict | None = None) -> TunedDocument:
    """tuned.json: every kernel's record, the space, the ptxas binaries by sha256, the GPU (None: static only); each
    kernel's record checked against its schema here, where the stages' work becomes the answer."""
    return TunedDocument(
        command=tuple(argv), space=space, ptxas=ptxas, gpu=gpu, static_sweep=static_dir, note=note,
        race_plan=race_plan, numerics=numerics, program=program,
        kernels=tuple(TunedKernel.from_json(k, f"tuned.json: kernel {k.get('kernel')}") for k in kernels),
        gpu_seconds=sum(k.get("gpu_seconds") or 0.0 for k in kernels))


def write_tuned(out: Path, doc: TunedDocument) -> Path:
    return doc.write(out)


def read_tuned(out: str | Path) -> TunedDocument:
    """A tune directory's answer, of any layout; a directory without one is bad input (one line)."""
    path = Path(out) / TUNED
    if not path.is_file():
        raise SpecError(f"{out}: no {TUNED} here (run `ptxprobe tune -o {out} ...` first)")
    return TunedDocument.from_json(_parsed(path), str(path))


def _parsed(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{path}: not a tuned.json ptxprobe can read ({exc})") from exc


def table_rows(doc: TunedDocument) -> list[list[str]]:
    """One row per kernel for the one-screen table: kernel, arch, best, gain [interval], runner-up, codes, GPU s."""
    rows = []
    for k in doc.kernels:
        where = k.kernel + (f" N={k.seq_len}" if k.seq_len else (f" {k.sizes}" if k.sizes else ""))
        codes = f"{len(k.distinct or ())}/{len(k.distinct or ()) + len(k.pruned or ())}"
        if k.status == STATIC_ONLY:
            rows.append([where, k.arch, "not raced (tuned.json: note)" if k.note else "not timed (no GPU)",
                         "-", "-", codes, "-"])
            continue
        g, proof = k.gain, k.proof
        best = "keep yours" if k.best_is_yours else k.best["label"]
        if g:
            gain = f"{g['ratio']:.4f} [{g['low']:.4f}, {g['high']:.4f}]" + (" fresh" if g.get("fresh_rounds") else "")
        elif proof:
            gain = (f"{proof['label']} {'slower' if proof['outcome'] == REFUTED else 'unconfirmed'}: "
                    f"{proof['ratio']:.4f} [{proof['low']:.4f}, {proof['high']:.4f}] {proof['verdict']}")
        else:
            gain = f"none proven (leader {k.leader_verdict or '-'})"
        r = k.runner_up
        runner = f"{r['label']} {r['ratio']:.4f}" if r else "-"
        rows.append([where, k.arch, best, gain, runner, codes, f"{k.gpu_seconds or 0:.0f}"])
    return rows
