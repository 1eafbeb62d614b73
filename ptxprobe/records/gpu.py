"""The GPU run's documents: ``calibration.json`` (did the run find what was planted, and nothing in its A/A copies)
and ``gpu.json`` (the card and its state). Neither carried a version before layout 1, which is what they are."""

from __future__ import annotations

from dataclasses import dataclass

from ptxprobe.records.manifest import without_superseded_timing
from ptxprobe.records.record import Json, Record, doc, required


@dataclass(frozen=True, kw_only=True)
class Calibration(Record):
    """Whether the run's timing can be trusted: A/A false positives and the power on planted slowdowns, each with
    the exact one-sided 95 % bound its counts certify, against the criteria stated beside them."""

    FILE = "calibration.json"
    VERSIONED = True

    groups: int = required("groups timed")
    passed: bool = required("every criterion met")
    failures: tuple[str, ...] = doc("each criterion missed, in words", default=())
    criteria: Json = doc("what passing needs: the A/A false-positive rate's maximum, the power per planted size")
    aa_false_positives: int | None = doc("A/A copies called faster or slower")
    aa_false_positive_rate: float | None = doc("their share of the A/A copies")
    aa_false_positive_upper_95: float | None = doc("its exact one-sided 95 % upper bound (Clopper-Pearson)")
    aa_halfwidth_median: float | None = doc("the A/A intervals' median half-width")
    aa_halfwidth_max: float | None = doc("their widest half-width")
    power: Json = doc("per planted size: the share of groups that found the plant")
    power_lower_95: Json = doc("per planted size: the power's exact one-sided 95 % lower bound")
    planted_in_groups: Json = doc("per planted size: the groups that carried the plant")
    delivered_in_groups: Json = doc("per planted size: the groups whose sizing left its stated size possible (the "
                                    "power's denominator)")
    undelivered: tuple[str, ...] = doc("each plant whose sizing ruled out its stated size, in words", default=())
    detected_in_groups: Json = doc("per planted size: the delivered plants found")
    planted_measured_fraction_median: Json = doc("per planted size: the median slowdown measured")
    planted_size_covered_in_groups: Json = doc("per planted size: the groups whose interval held the plant's size")
    code_plant: Json = doc("the planted code change (a dependent chain): where it was found and how large")
    gpu_seconds: float | None = doc("GPU seconds of the groups")
    note: str | None = doc("why a criterion does not apply")


@dataclass(frozen=True, kw_only=True)
class GpuFacts(Record):
    """The card a GPU run ran on and its state then (``repro`` compares the identity: name, UUID, VBIOS, driver,
    power limit, ECC, application clock)."""

    FILE = "gpu.json"
    VERSIONED = True

    gpu: str | None = doc("the card's name")
    arch: str | None = doc("its arch (sm_90a, ...)")
    sms: int | None = doc("streaming multiprocessors")
    memory_gb: float | None = doc("memory, GiB")
    torch: str | None = doc("torch release")
    cuda_runtime: str | None = doc("CUDA runtime torch was built with")
    driver: str | None = doc("driver release")
    uuid: str | None = doc("the card's UUID")
    vbios: str | None = doc("its VBIOS")
    ecc_mode: str | None = doc("ECC mode")
    power_limit_w: str | None = doc("the power limit it enforced, W (as nvidia-smi says it)")
    power_w: str | None = doc("board power when the run began, W")
    app_clock_mhz: str | None = doc("application clock, MHz")
    sm_clock_mhz: str | None = doc("SM clock when the run began, MHz")
    sm_clock_max_mhz: str | None = doc("its maximum, MHz")
    mem_clock_mhz: str | None = doc("memory clock, MHz")
    temperature_c: str | None = doc("temperature, °C")
    from_rows: bool = doc("finalised from the rows alone (the card's facts as the rows recorded them)", default=False)


@dataclass(frozen=True, kw_only=True)
class GroupRecord(Record):
    """One timed group of a GPU run (a line of ``groups.jsonl``): its A/A pair, its planted controls, the orders it
    was timed in and the timing plan as resolved, what a replay of the group or its calibration needs."""

    FILE = "groups.jsonl"

    group_id: str = required("the group: a source at one problem, one ptxas")
    aa: Json = doc("the A/A pair: the baseline's cubin loaded twice, compared as a name would be")
    calibration: Json = doc("the planted controls: each plant's size, interval, verdict and whether it was found")
    calibration_samples: Json = doc("the plants' raw samples")
    identical_code: tuple[str, ...] = doc("name templates whose machine code is the baseline's: not timed", default=())
    order_seed: int | None = doc("the seed the run orders were drawn from (the group's own, from its id)")
    compared: tuple[Json, ...] = doc("the names block's pairs, in the order their orders were drawn", default=())
    timing_plan: Json = doc("the timing plan as resolved, defaults included")
    gpu_seconds: float | None = doc("GPU seconds of the group, setup included")

    @classmethod
    def upgrade(cls, doc: dict, version: int, where: str) -> dict:
        if isinstance(doc.get("timing_plan"), dict):  # the first GPU design's keys, accepted and never used
            # and a plan recorded before each comparison stopped on its own ran every pair until all could stop
            doc["timing_plan"] = {"stopping": "together", **without_superseded_timing(doc["timing_plan"])}
        return doc
