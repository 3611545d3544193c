"""`builders predict`: a local GLiNER model's zero-shot predictions on the stored benchmarks'
test sets, each with its own labels (`else` among them), by the steps GLiNER's `evaluate`
takes, into a folder written whole (`<benchmark>.json` each, `manifest.json`). GLiNER is
imported here only (its own venv: `make gliner`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders import __version__
from builders.errors import InputError, ModelUnavailable
from builders.evaluate.scoring import MANIFEST
from builders.hub.folder import atomic_dir, write_json
from builders.shift.benchmarks import resolve, sentence_sources
from builders.shift.models import auto_device, weights_fingerprint

if TYPE_CHECKING:
    from builders.store import Store

GLINER_HINT = "GLiNER is not installed here: `make gliner` makes .venv-gliner with it (README)"


@dataclass(frozen=True)
class PredictRequest:
    """What to predict (`benchmarks` in `--benchmarks` syntax; `flat`: GLiNER's `flat_ner`;
    at most `limit` sentences a benchmark)."""

    model: Path
    out: Path
    benchmarks: str = "all"
    threshold: float = 0.5
    flat: bool = True
    batch_size: int = 8
    limit: int | None = None


def load_gliner(folder: Path) -> Any:
    """The GLiNER model in `folder`, offline, on `auto_device()` ($LABELSHIFT_DEVICE pins it)."""
    try:
        from gliner import GLiNER
    except ImportError as exc:
        raise ModelUnavailable(f"{GLINER_HINT} ({exc})") from None
    if not (folder / "gliner_config.json").is_file():
        raise InputError(f"{folder}: not a GLiNER model folder (no gliner_config.json)")
    model = GLiNER.from_pretrained(str(folder), local_files_only=True)
    model.to(auto_device())
    model.eval()
    return model


def gliner_predict(
    model: Any, sentences: list[list[str]], labels: list[str], request: PredictRequest,
    update: Callable[[int], None] = lambda n: None,
) -> list[dict[str, Any]]:  # fmt: skip
    """GLiNER layout records (`tokenized_text`, `ner` [start, end inclusive, label]) for
    `sentences`, batched as GLiNER's `evaluate` batches them."""
    import torch

    collator, out = model.create_collator(), []
    with torch.no_grad():
        for i in range(0, len(sentences), request.batch_size):
            chunk = [
                {"tokenized_text": t, "ner": None} for t in sentences[i : i + request.batch_size]
            ]
            batch = model.collate_batch(chunk, labels, collator)
            found = model.run_batch(batch, threshold=request.threshold, move_to_device=True)
            decoded = model.decode_batch(found, batch, threshold=request.threshold,
                                         flat_ner=request.flat, multi_label=False)  # fmt: skip
            out += [{"tokenized_text": r["tokenized_text"], "ner": [[s.start, s.end, s.entity_type] for s in spans]}
                    for r, spans in zip(chunk, decoded, strict=True)]  # fmt: skip
            update(len(chunk))
    return out


def predict(
    store: Store,
    request: PredictRequest,
    *,
    on_note: Callable[[str], None] | None = None,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
) -> dict[str, Any]:
    """Predict every benchmark of the request into `request.out` (swapped in whole); returns
    the manifest. `progress(name, total)` gives an `update(n)` per benchmark."""
    import gliner
    import torch

    model = load_gliner(request.model)
    sets = resolve(request.benchmarks, store=store, keep_misc=True)
    rows, why = sentence_sources(store, sets, on_note or (lambda s: None))
    if why:
        raise InputError(
            "no test sentences to predict for " + "; ".join(f"{k}: {v}" for k, v in why.items())
        )
    labels = {s.name: list(s.labels) for s in sets}
    done: dict[str, Any] = {}
    with atomic_dir(request.out) as tmp:
        for name, source, split in rows:
            sentences = [t for _, _, t, _ in store.sentences_with_spans(source, split)][
                : request.limit
            ]
            bar = progress(name, len(sentences)) if progress else (lambda n: None)
            records = gliner_predict(model, sentences, labels[name], request, bar)
            (tmp / f"{name}.json").write_text(
                json.dumps(records, ensure_ascii=False), encoding="utf-8"
            )
            done[name] = {"gold": f"{source}:{split}", "sentences": len(records), "labels": labels[name],
                          "predicted": sum(len(r["ner"]) for r in records)}  # fmt: skip
        manifest = {
            "model": str(request.model.resolve()),
            "weights": weights_fingerprint(request.model),
            **{k: v for k, v in asdict(request).items() if k not in ("model", "out")},
            "device": str(model.device),
            "benchmarks": done,
            "versions": {
                "gliner": gliner.__version__,
                "torch": torch.__version__,
                "toolkit": __version__,
            },
        }
        write_json(tmp / MANIFEST, manifest)
    return manifest
