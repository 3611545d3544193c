"""The device an auto build computes on is known without importing torch where the machine can
have no GPU for it: a warm build on a CPU machine (every vector cached) needs no model, and
importing torch only to learn "cpu" took about 3 s of a 15 s NuNER build."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import types
from pathlib import Path

import pytest

from builders.shift import models


def _driver(loads: bool):  # type: ignore[no-untyped-def]
    def cdll(name: str, *args: object, **kwargs: object) -> object:
        assert name == models.CUDA_DRIVER
        if not loads:
            raise OSError(f"{name}: cannot open shared object file")
        return object()

    return cdll


@pytest.fixture
def linux(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Linux with no ROCm or NVIDIA device node (the returned path, the ROCm one: create it
    to add one; the NVIDIA ones are beside it)."""
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(models, "ROCM_DEVICE", tmp_path / "kfd")
    nodes = tuple(tmp_path / n for n in ("nvidiactl", "dxg", "nvhost-ctrl-gpu", "nvgpu"))
    monkeypatch.setattr(models, "GPU_DEVICES", nodes)
    return tmp_path / "kfd"


def test_no_cuda_driver_and_no_rocm_device_is_no_gpu(
    linux: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ctypes, "CDLL", _driver(False))
    assert models.no_gpu_here()


def test_a_cuda_driver_leaves_it_to_torch(linux: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes, "CDLL", _driver(True))
    assert not models.no_gpu_here()


def test_a_rocm_device_leaves_it_to_torch(linux: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes, "CDLL", _driver(False))
    linux.touch()
    assert not models.no_gpu_here()


@pytest.mark.parametrize("node", ["nvidiactl", "dxg", "nvhost-ctrl-gpu", "nvgpu"])
def test_an_nvidia_device_node_leaves_it_to_torch_where_the_driver_does_not_load_here(
    linux: Path, monkeypatch: pytest.MonkeyPatch, node: str
) -> None:
    """A host or container with the GPU (nvidiactl), WSL2 (dxg) or a Jetson (nvhost-ctrl-gpu)
    whose driver library this process cannot load: torch's own libraries may still find it."""
    monkeypatch.setattr(ctypes, "CDLL", _driver(False))
    (linux.parent / node).touch()
    assert not models.no_gpu_here()


def test_off_linux_torch_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")  # mps needs torch's own answer
    monkeypatch.setattr(ctypes, "CDLL", _driver(False))
    assert not models.no_gpu_here()


@pytest.mark.parametrize(("cuda", "mps", "device"), [(True, False, "cuda"), (False, True, "mps")])
def test_where_a_gpu_may_be_torch_decides(
    monkeypatch: pytest.MonkeyPatch, cuda: bool, mps: bool, device: str
) -> None:
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: cuda),
        backends=types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: mps)),
    )
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(models, "no_gpu_here", lambda: False)
    assert models.auto_device() == device


@pytest.mark.skipif(not models.no_gpu_here(), reason="this machine may have a GPU")
def test_on_this_cpu_machine_the_device_imports_no_torch() -> None:
    code = (
        "import sys\n"
        "from builders.shift.models import auto_device\n"
        "assert auto_device() == 'cpu'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("pinned", ["cpu", "cuda", "cuda:1", "MPS "])
def test_the_device_can_be_pinned(monkeypatch: pytest.MonkeyPatch, pinned: str) -> None:
    """`LABELSHIFT_DEVICE` names the device, over the probe and torch (an escape where the
    probe errs): the model loads there and its vectors are cached under that device."""
    monkeypatch.setenv(models.DEVICE_ENV, pinned)
    monkeypatch.setattr(models, "no_gpu_here", lambda: pytest.fail("probed"))
    assert models.auto_device() == pinned.strip().lower()


@pytest.mark.parametrize("pinned", ["gpu", "cuda:x", "cpu cuda"])
def test_a_device_torch_does_not_take_is_refused(
    monkeypatch: pytest.MonkeyPatch, pinned: str
) -> None:
    from builders.errors import InvalidValue

    monkeypatch.setenv(models.DEVICE_ENV, pinned)
    with pytest.raises(InvalidValue, match=r"LABELSHIFT_DEVICE=.*cpu, cuda, cuda:N or mps"):
        models.auto_device()
