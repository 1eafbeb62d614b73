"""Between-run variation of throughput ratios, and several runs of one comparison pooled into one estimate.

The model (random effects): run ``r`` of comparison ``k`` measures the log ratio

    y_rk = theta_k + u_rk + e_rk,   u_rk ~ N(0, tau_k^2),   e_rk ~ N(0, s_rk^2),

``theta_k`` the comparison's true log ratio, ``u_rk`` the run's own effect (the card's state, the clocks, the
build of that day: what a second run does not share), ``e_rk`` the within-run error whose standard error
``s_rk`` comes from the run's own interval at its own level (``standard_error``). The between-run SD may grow
with the effect: ``tau_k^2 = tau0^2 + (slope * theta_k)^2`` (a run effect proportional to the effect, as a clock
or occupancy shift would give). ``estimate_between_run`` fits (tau0, slope) by restricted maximum likelihood
over every comparison measured in two or more runs (each comparison's theta_k integrated out), and keeps the
slope only when a likelihood-ratio test at 5 % wants it (boundary-corrected: half chi-square(1), 2.71).

Two runs of one comparison then differ by d = y_1 - y_2 with variance s_1^2 + s_2^2 + 2 tau^2: each run has its
own run effect (``divergence_z``). ``pool`` combines runs by inverse-variance weights under the same model:
with tau known (estimated over many comparisons, the usual case) a normal interval; without, DerSimonian-Laird's
tau from the runs themselves and the Hartung-Knapp-Sidik-Jonkman t interval (DL's normal interval undercovers
with few runs). A gap judged against a fitted model reads a t on its comparisons less two (``BetweenRun.critical``):
tau is estimated, not known. Both validated on simulated runs with known tau (tests/test_between_run.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

SLOPE_LR_CRITICAL = 2.706  # 5 % for a parameter on its boundary: 0.5 chi2(0) + 0.5 chi2(1)


def standard_error(low: float, high: float, level: float = 0.95) -> float:
    """The standard error of a log ratio from its interval at that interval's own level (a 99 % interval is
    2 x 2.576 standard errors wide, not 2 x 1.96)."""
    return (math.log(high) - math.log(low)) / (2.0 * float(sps.norm.ppf(0.5 + level / 2.0)))


@dataclass(frozen=True)
class BetweenRun:
    """The fitted between-run model: SD ``tau(theta) = sqrt(tau0^2 + (slope * theta)^2)`` of a log ratio."""

    tau0: float
    slope: float = 0.0
    method: str = "stated"
    comparisons: int = 0  # comparisons measured in >= 2 runs that the fit used
    runs: int = 0  # the most runs any one comparison had
    source: str = ""  # the runs it was estimated from
    tau0_dl: float | None = None  # DerSimonian-Laird's moment estimate on the same data (slope 0), beside REML

    def tau(self, theta: float = 0.0) -> float:
        return math.sqrt(self.tau0**2 + (self.slope * theta) ** 2)

    @property
    def degrees_of_freedom(self) -> int | None:
        """What a judgement against this model pays for tau being estimated: a fitted model's comparisons less its
        two parameters (Higgins-Thompson-Spiegelhalter's t on k - 2 for a prediction under an estimated tau); a
        stated tau is taken as known (None: the normal)."""
        return self.comparisons - 2 if self.method != "stated" and self.comparisons > 2 else None

    def critical(self, level: float = 0.95) -> float:
        """The two-sided critical value at ``level``: t on ``degrees_of_freedom``, or the normal's."""
        df = self.degrees_of_freedom
        return float(sps.t.ppf(0.5 + level / 2.0, df)) if df else z_critical(level)

    def p_value(self, z: float) -> float:
        """The two-sided p of a standardized gap under this model's reference distribution."""
        df = self.degrees_of_freedom
        return float(2.0 * (sps.t.sf(abs(z), df) if df else sps.norm.sf(abs(z))))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def of(cls, d: Mapping) -> BetweenRun:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def _by_comparison(runs: Sequence[Mapping[object, tuple[float, float]]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(log ratios, standard errors) per comparison present in two or more runs."""
    keys: dict[object, list[tuple[float, float]]] = {}
    for run in runs:
        for k, ys in run.items():
            keys.setdefault(k, []).append(ys)
    return [(np.array([y for y, _ in v]), np.array([s for _, s in v])) for v in keys.values() if len(v) >= 2]


def _padded(groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Comparisons x runs arrays of log ratios and standard errors, and which cells hold a run."""
    width = max(y.size for y, _ in groups)
    y, s, m = np.zeros((len(groups), width)), np.ones((len(groups), width)), np.zeros((len(groups), width), bool)
    for i, (yi, si) in enumerate(groups):
        y[i, : yi.size], s[i, : yi.size], m[i, : yi.size] = yi, si, True
    return y, s, m


def _reml_loglik(padded, tau0: float, slope: float) -> float:
    """The restricted log-likelihood, each comparison's theta integrated out (its tau at its runs' mean)."""
    y, s, m = padded
    theta = np.sum(y * m, axis=1, keepdims=True) / np.sum(m, axis=1, keepdims=True)
    v = s**2 + tau0**2 + (slope * theta) ** 2
    w = m / v
    mean = np.sum(w * y, axis=1, keepdims=True) / np.sum(w, axis=1, keepdims=True)
    return float(-0.5 * (np.sum(np.log(v) * m) + np.sum(np.log(np.sum(w, axis=1))) + np.sum(w * (y - mean) ** 2)))


def _fit(groups, with_slope: bool) -> tuple[float, float, float]:
    padded = _padded(groups)
    scale = float(np.median(padded[1][padded[2]])) or 1e-4

    def neg(p):
        return -_reml_loglik(padded, abs(p[0]) * scale, abs(p[1]) if with_slope else 0.0)

    best = None
    for start in ((0.5, 0.02), (2.0, 0.0), (0.05, 0.1)):
        res = optimize.minimize(neg, np.array(start if with_slope else start[:1] + (0.0,)), method="Nelder-Mead",
                                options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 4000})
        if best is None or res.fun < best.fun:
            best = res
    return abs(best.x[0]) * scale, abs(best.x[1]) if with_slope else 0.0, -best.fun


def dersimonian_laird_pairs(groups) -> float:
    """DerSimonian-Laird's moment estimate of a common tau over every comparison (slope 0): per comparison
    Cochran's Q against its expectation, summed (Q - (k - 1)) / (sum w - sum w^2 / sum w)."""
    num, den = 0.0, 0.0
    for y, s in groups:
        w = 1.0 / s**2
        mean = float(np.sum(w * y) / np.sum(w))
        num += float(np.sum(w * (y - mean) ** 2)) - (y.size - 1)
        den += float(np.sum(w) - np.sum(w**2) / np.sum(w))
    return math.sqrt(max(0.0, num / den)) if den > 0 else 0.0


def estimate_between_run(runs: Sequence[Mapping[object, tuple[float, float]]], source: str = "",
                         allow_slope: bool = True) -> BetweenRun | None:
    """REML fit of the between-run model over runs given as {comparison: (log ratio, standard error)}; None
    with fewer than three comparisons measured twice. The slope is kept when the likelihood-ratio test wants it."""
    groups = _by_comparison(runs)
    if len(groups) < 3:
        return None
    tau0, _, ll0 = _fit(groups, False)
    slope = 0.0
    if allow_slope:
        t1, s1, ll1 = _fit(groups, True)
        if 2.0 * (ll1 - ll0) > SLOPE_LR_CRITICAL:
            tau0, slope = t1, s1
    return BetweenRun(float(tau0), float(slope), "REML", len(groups), max(y.size for y, _ in groups), source,
                      dersimonian_laird_pairs(groups))


def divergence_z(y1: float, s1: float, y2: float, s2: float, model: BetweenRun) -> tuple[float, float]:
    """d = y1 - y2 and its standard error sqrt(s1^2 + s2^2 + 2 tau^2), tau at the two runs' mean effect."""
    tau = model.tau((y1 + y2) / 2.0)
    return y1 - y2, math.sqrt(s1**2 + s2**2 + 2.0 * tau**2)


@dataclass(frozen=True)
class Pooled:
    """Several runs of one comparison as one log ratio (``estimate``) with its interval; ``ratio`` etc. are exp."""

    estimate: float
    low: float
    high: float
    level: float
    tau: float
    runs: int
    method: str

    @property
    def ratio(self) -> tuple[float, float, float]:
        return math.exp(self.estimate), math.exp(self.low), math.exp(self.high)


def pool(y: Sequence[float], se: Sequence[float], model: BetweenRun | None = None, level: float = 0.95) -> Pooled:
    """Random-effects pooling of one comparison's runs (log ratios ``y``, standard errors ``se``).

    ``model`` given (tau estimated over many comparisons): weights 1 / (s^2 + tau^2) and a normal interval.
    None: tau by DerSimonian-Laird from these runs and the Hartung-Knapp-Sidik-Jonkman interval (t, k - 1 df)."""
    y, s = np.asarray(y, dtype=float), np.asarray(se, dtype=float)
    if y.size == 0:
        raise ValueError("pool needs one or more runs")
    if model is not None:
        tau = model.tau(float(np.mean(y)))
        w = 1.0 / (s**2 + tau**2)
        est = float(np.sum(w * y) / np.sum(w))
        half = float(sps.norm.ppf(0.5 + level / 2)) / math.sqrt(float(np.sum(w)))
        return Pooled(est, est - half, est + half, level, tau, int(y.size), "random-effects, tau given")
    if y.size < 2:
        raise ValueError("pooling without a between-run model needs two or more runs")
    tau = dersimonian_laird_pairs([(y, s)])
    w = 1.0 / (s**2 + tau**2)
    est = float(np.sum(w * y) / np.sum(w))
    q = float(np.sum(w * (y - est) ** 2)) / (y.size - 1)
    se_hk = math.sqrt(max(q, 1.0) / float(np.sum(w)))  # the HKSJ variance, never below the plain one
    half = float(sps.t.ppf(0.5 + level / 2, y.size - 1)) * se_hk
    return Pooled(est, est - half, est + half, level, tau, int(y.size), "random-effects, DL + HKSJ")


def z_critical(level: float = 0.95) -> float:
    """The two-sided normal critical value at ``level``."""
    return float(sps.norm.ppf(0.5 + level / 2.0))
