"""Runtimes that turn token buckets into unit vectors: torch, ONNX Runtime and OpenVINO.

    runner = load_exported(ensure_export(target, backend, st_loader, key), backend, precision)
    vectors = runner.encode(labels, rows, progress)        float32, unit rows, input order

`torch` runs the sentence-transformer itself (any device, fp32 / fp16 / bf16). `onnx` and
`openvino` run a graph of the model with its pooling and normalisation inside, exported once
into the model cache (`exported/<model>-<weights>-<backend>/`, checked against torch first)
through the runtimes' own converters: `optimum` pins older sentence-transformers.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from builders.deferred import np
from builders.errors import BuildersError, ModelUnavailable, opt
from builders.files import rename_into_place, temp_dir
from builders.progress import progress_bar
from builders.shift.buckets import TokenPlan, label_tokenizer, tokenise

#: What `pip install 'labelshift-builders[<backend>]'` brings: module names to import.
EXTRA_MODULES = {"onnx": ("onnxruntime", "onnx", "onnxscript"), "openvino": ("openvino",)}
#: An export must give these cosines against torch on the probe labels before it is kept.
EXPORT_MIN_COSINE = 0.9999
PROBES = ("person", "programming language", "city", "river of the Amazon basin")
META = "labelshift-export.json"


def no_bf16() -> str:
    """Why OpenVINO does not run bf16 here, and the settings that run instead."""
    return (
        "this CPU has no bf16 units, so OpenVINO would run f32 under a bf16 label; "
        f"use {opt('precision', 'fp32')}, or {opt('backend', 'torch')} "
        f"{opt('precision', 'bf16')} (emulated, slower)"
    )


def require_extra(backend: str) -> None:
    """Import the backend's packages, or say which extra installs them."""
    for name in EXTRA_MODULES.get(backend, ()):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ModelUnavailable(
                f"{opt('backend', backend)} needs the package {name!r}: "
                f"pip install 'labelshift-builders[{backend}]'"
            ) from exc


def fast_tokenizer(st: Any) -> Any:
    """The `tokenizers.Tokenizer` behind a sentence-transformer (its lower-casing included)."""
    tok = getattr(st.tokenizer, "backend_tokenizer", None)
    if tok is None:
        raise ModelUnavailable("the model has no fast tokenizer; use a model with tokenizer.json")
    return tok


class Runner:
    """Labels -> unit float32 vectors in input order, through one runtime."""

    name = "runner"

    def __init__(self, tokenizer: Any, max_length: int, dim: int):
        self.dim = dim
        self._labels_tok = label_tokenizer(tokenizer, max_length)

    def plan(self, labels: Sequence[str]) -> TokenPlan:
        return tokenise(self._labels_tok, labels)

    def encode(self, labels: Sequence[str], rows: int, progress: bool = False) -> np.ndarray:
        plan = self.plan(labels)
        with progress_bar(f"embedding ({self.name})", not progress, len(plan), " labels") as update:
            return self.run(plan, rows, update)

    def run(self, plan: TokenPlan, rows: int, done: Callable[[int], Any]) -> np.ndarray:
        """Numpy runtimes: each batch's vectors written at their positions."""
        out = np.empty((len(plan), self.dim), dtype=np.float32)
        for pos, length, n in plan.batches(rows):
            out[pos[:n]] = self.forward(plan.ids(pos, length))[:n]
            done(n)
        return out

    def forward(self, ids: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class TorchRunner(Runner):
    """The sentence-transformer on its device: ids copied in once, vectors copied back once."""

    def __init__(self, st: Any, precision: str):
        import torch

        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
        self.st = st.to(dtype) if precision != "fp32" else st
        self.st.eval()
        self.device = torch.device(st.device)
        self.name = f"torch {precision} {self.device.type}"
        super().__init__(fast_tokenizer(st), int(st.max_seq_length), _dimension(st))

    def run(self, plan: TokenPlan, rows: int, done: Callable[[int], Any]) -> np.ndarray:
        import torch
        import torch.nn.functional as F

        dev = self.device
        with torch.inference_mode():
            flat = torch.from_numpy(plan.flat).to(dev)
            offsets = torch.from_numpy(plan.offsets).to(dev)
            out = torch.empty((len(plan), self.dim), dtype=torch.float32, device=dev)
            for pos, length, n in plan.batches(rows):
                where = torch.from_numpy(pos).to(dev)
                ids = flat[offsets[where][:, None] + torch.arange(length, device=dev)]
                features = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
                vec = self.st(features)["sentence_embedding"].float()
                out[where[:n]] = F.normalize(vec[:n], dim=-1)
                done(n)
            return out.cpu().numpy()


class OnnxRunner(Runner):
    def __init__(self, folder: Path, meta: dict[str, Any]):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(folder / "model.onnx"), opts, providers=["CPUExecutionProvider"]
        )
        self.name = "onnx fp32 cpu"
        super().__init__(_load_tokenizer(folder), int(meta["max_length"]), int(meta["dim"]))

    def forward(self, ids: np.ndarray) -> np.ndarray:
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        return np.asarray(self.session.run(None, feed)[0], dtype=np.float32)


class OpenVinoRunner(Runner):
    def __init__(self, folder: Path, meta: dict[str, Any], precision: str):
        import openvino as ov

        hint = {"fp32": "f32", "bf16": "bf16"}[precision]
        core = ov.Core()
        if precision == "bf16" and not _has_bf16(core):
            raise ModelUnavailable(no_bf16())
        # An explicit hint: on CPUs with bf16 units OpenVINO would otherwise run bf16 silently.
        compiled = core.compile_model(
            str(folder / "model.xml"), "CPU", {"INFERENCE_PRECISION_HINT": hint}
        )
        ran = compiled.get_property("INFERENCE_PRECISION_HINT")
        if ran != getattr(ov.Type, hint):  # the plugin may fall back: never mislabel vectors
            raise ModelUnavailable(
                f"OpenVINO compiled the model for {ran.get_type_name()}, not the {precision} "
                "asked, so its vectors would be cached under a precision they were not made in; "
                f"use another {opt('precision')} or {opt('backend')}"
            )
        self.request = compiled.create_infer_request()
        self.name = f"openvino {precision} cpu"
        super().__init__(_load_tokenizer(folder), int(meta["max_length"]), int(meta["dim"]))

    def forward(self, ids: np.ndarray) -> np.ndarray:
        res = self.request.infer({"input_ids": ids, "attention_mask": np.ones_like(ids)})
        return np.array(res[0], dtype=np.float32)


def _has_bf16(core: Any) -> bool:
    return "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def unavailable(backend: str, precision: str) -> str | None:
    """Why this machine cannot run `backend` at `precision` (None when it can)."""
    try:
        require_extra(backend)
    except BuildersError as exc:
        return str(exc)
    if backend == "openvino" and precision == "bf16":
        import openvino as ov

        return None if _has_bf16(ov.Core()) else no_bf16()
    return None


def _dimension(st: Any) -> int:
    return int(getattr(st, "get_embedding_dimension", st.get_sentence_embedding_dimension)())


def _load_tokenizer(folder: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json"))


def _graph(st: Any) -> Any:
    """What is exported: ids and mask in, pooled unit vectors out (the model's own pooling)."""
    import torch

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.st = st

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            feats = {"input_ids": input_ids, "attention_mask": attention_mask}
            vec = self.st(feats)["sentence_embedding"].float()
            return torch.nn.functional.normalize(vec, dim=-1)

    return Graph().eval()


def _export_onnx(graph: Any, example: tuple[Any, Any], work: Path) -> None:
    import torch

    dyn = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}}
    torch.onnx.export(
        graph,
        example,
        str(work / "model.onnx"),
        input_names=["input_ids", "attention_mask"],
        output_names=["sentence_embedding"],
        dynamic_shapes=dyn,
        dynamo=True,
        external_data=False,
        verbose=False,
    )


def _export_openvino(graph: Any, example: tuple[Any, Any], work: Path) -> None:
    import openvino as ov

    model = ov.convert_model(
        graph, example_input={"input_ids": example[0], "attention_mask": example[1]}
    )
    ov.save_model(model, str(work / "model.xml"), compress_to_fp16=False)


@contextmanager
def _quiet_converters() -> Iterator[None]:
    """The converters' tracer warnings and progress lines say nothing to a user: hide them."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


#: The opening of transformers' line when a model's `loss_function` is read (an export's
#: tracer reads every attribute): "`loss_type=None` was set in the config but it is
#: unrecognized". An encoder that only embeds has no loss: the line means nothing here.
LOSS_TYPE_LINE = "`loss_type="


@contextmanager
def quiet_loss_type() -> Iterator[None]:
    """transformers' `loss_type=None` line, and only it, left out for the block."""
    logger = logging.getLogger("transformers.modeling_utils")

    def drop(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(LOSS_TYPE_LINE)

    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def export_dir(cache: Path, model_slug: str, weights: str, backend: str) -> Path:
    return cache / "exported" / f"{model_slug}-{weights}-{backend}"


def ensure_export(target: Path, backend: str, st_loader: Callable[[], Any], key: str) -> Path:
    """The exported model at `target`, made once: beside it, checked against torch, renamed."""
    if (target / META).is_file():
        return target
    require_extra(backend)
    import torch

    st = st_loader()
    with temp_dir(target) as work:
        graph = _graph(st)
        ids = torch.tensor([[0, 5, 6, 2], [0, 7, 8, 2]], dtype=torch.long)
        with torch.no_grad(), _quiet_converters(), quiet_loss_type():
            (_export_onnx if backend == "onnx" else _export_openvino)(
                graph, (ids, torch.ones_like(ids)), work
            )
        fast_tokenizer(st).save(str(work / "tokenizer.json"))
        meta = {"key": key, "backend": backend, "max_length": int(st.max_seq_length)}
        meta["dim"] = _dimension(st)
        with quiet_loss_type():
            _check_export(work, meta, backend, TorchRunner(st, "fp32"))
        (work / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        rename_into_place(work, target, lambda t: (t / META).is_file())
    return target


def _check_export(work: Path, meta: dict[str, Any], backend: str, torch_runner: Runner) -> None:
    runner = OnnxRunner(work, meta) if backend == "onnx" else OpenVinoRunner(work, meta, "fp32")
    got = runner.encode(PROBES, rows=len(PROBES))
    want = torch_runner.encode(PROBES, rows=len(PROBES))
    cos = float((got * want).sum(axis=1).min())
    if cos < EXPORT_MIN_COSINE:
        raise ModelUnavailable(
            f"the {backend} export of {meta['key']} gives cosine {cos:.6f} against torch "
            f"(need >= {EXPORT_MIN_COSINE}); it is not kept"
        )


def load_exported(folder: Path, backend: str, precision: str) -> Runner:
    meta = json.loads((folder / META).read_text(encoding="utf-8"))
    require_extra(backend)
    if backend == "onnx":
        return OnnxRunner(folder, meta)
    return OpenVinoRunner(folder, meta, precision)
