"""A stand-in for the GPU work of one group, for testing the multi-GPU dispatch on CPU."""

from __future__ import annotations

import json
import os
import time


def fake_group(device: str, group: dict, log_path: str, seconds: float) -> None:
    start = time.time()
    time.sleep(seconds)
    with open(log_path, "a") as f:
        f.write(
            json.dumps(
                {
                    "device": device,
                    "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                    "group": group["group_id"],
                    "start": start,
                    "end": time.time(),
                    "pid": os.getpid(),
                }
            )
            + "\n"
        )


def failing_group(device: str, group: dict, log_path: str, seconds: float) -> None:
    if group["group_id"] == "g-bad":
        os._exit(3)
    fake_group(device, group, log_path, seconds)
