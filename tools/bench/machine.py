"""What this machine can do: its matmul limit, the model's FLOP per image, and its description."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field

import torch
from torch import nn

from utils.device import cpu_model, cpu_native_bfloat16
from utils.env import matmul_rates
from utils.models import SimpleCNN

MATMUL_SIZE = {"cpu": 2048, "cuda": 8192}  # large enough to run at full speed, 4096 elsewhere
MATMUL_REPEAT = 5  # float32 and bfloat16 matmuls timed before each round of epochs


def training_flop_per_image(batch_size: int = 16) -> float:
    """FLOP of one SimpleCNN training step per image (forward, loss, backward), as torch counts them.

    FlopCounterMode counts matrix multiplies and convolutions, the work the limit measures; the
    cheap elementwise layers (BatchNorm, ReLU, pooling) and the optimizer step are not counted.
    """
    from torch.utils.flop_counter import FlopCounterMode

    model = SimpleCNN()
    X = torch.zeros(batch_size, 1, 28, 28)
    y = torch.zeros(batch_size, dtype=torch.long)
    with FlopCounterMode(display=False) as counter:
        nn.functional.cross_entropy(model(X), y).backward()
    return counter.get_total_flops() / batch_size


@dataclass
class Limits:
    """Matmul GFLOP/s per round (the median of that round's repeats) and FLOP per image."""

    flop_per_image: float
    matmul_size: int
    float32: list[float] = field(default_factory=list)
    bfloat16: list[float] = field(default_factory=list)  # empty where bfloat16 is not native

    def images_per_s(self, bf16: bool = False) -> float:
        """The images/s the median limit would allow if all counted FLOP ran at matmul speed."""
        rates = self.bfloat16 if bf16 else self.float32
        return statistics.median(rates) * 1e9 / self.flop_per_image

    def shares(self, images_per_s: list[float], bf16: bool = False) -> list[float]:
        """Share of the limit (of the path's own precision) reached in each round's epoch."""
        rates = self.bfloat16 if bf16 else self.float32
        return [
            ips * self.flop_per_image / (gflops * 1e9)
            for ips, gflops in zip(images_per_s, rates, strict=True)
        ]


def matmul_size(device: torch.device, quick: bool) -> int:
    """The matrix size of the limit on `device`; a quarter of it for a --quick smoke test."""
    return MATMUL_SIZE.get(device.type, 4096) // (4 if quick else 1)


def measure_limits(limits: Limits, device: torch.device, native_bf16: bool) -> None:
    """Append one round's median float32 (and native bfloat16) matmul GFLOP/s to `limits`."""
    n = limits.matmul_size
    limits.float32.append(statistics.median(matmul_rates(device, n, MATMUL_REPEAT, torch.float32)))
    if native_bf16:
        rates = matmul_rates(device, n, MATMUL_REPEAT, torch.bfloat16)
        limits.bfloat16.append(statistics.median(rates))


def bf16_native(device: torch.device) -> bool:
    """Whether `device` computes bfloat16 in hardware (AVX512-BF16/AMX on a CPU, Ampere+ GPUs)."""
    if device.type == "cpu":
        return cpu_native_bfloat16()
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return False


def describe_device(device: torch.device) -> str:
    """The device's name and, on a CPU, the vector instructions torch uses and its threads."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type != "cpu":
        return device.type
    capability = torch.backends.cpu.get_cpu_capability()
    count = torch.get_num_threads()
    threads = f"{count} thread{'s' * (count != 1)} (inter-op {torch.get_num_interop_threads()})"
    return f"{cpu_model()}, instruction set {capability}, {threads}"


def load_average() -> float | None:
    """The 1-minute load average (runnable processes), where the OS reports one."""
    try:
        return round(os.getloadavg()[0], 1)
    except (AttributeError, OSError):  # Windows has none
        return None
