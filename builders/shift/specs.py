"""The settings every request shares, each one value checked once where it is made.

    embedding = EmbeddingSpec("all-MiniLM-L6-v2", backend="onnx")     how labels are embedded
    metric = MetricSpec(k=100, weighting="linear")                      how Familiarity is read
    Embedder.of(embedding)                                              the one that embeds

A request holds one of each it needs instead of their fields one by one. Their flat spelling
(`model`, ..., `k`, ...), which build.json, recorded commands and scenarios.toml hold, is
`flat`'s and `split_flat`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from builders.defaults import (
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    DEFAULT_PROTOCOL,
    PRECISIONS,
    PROTOCOLS,
    SEED,
    TEMPERATURE,
    WEIGHTING,
    WEIGHTINGS,
    K,
)
from builders.errors import ConflictingOptions, InvalidValue, opt

#: The precisions each backend runs; the others are refused with this list.
SUPPORTED = {
    "auto": PRECISIONS,  # `builders.shift.auto`: a CPU runtime at fp32, torch otherwise
    "torch": PRECISIONS,
    "onnx": ("fp32",),
    "openvino": ("fp32", "bf16"),
}


@dataclass(frozen=True)
class EmbeddingSpec:
    """How labels are embedded: the sentence-transformer (`model`: a name, a local folder or a
    Hub name), the runtime (`backend`: auto, torch, onnx, openvino) and its `precision`. What
    changes a vector's bytes beyond these (device, batch rows, weights) is the `Embedder`'s."""

    model: str = DEFAULT_MODEL
    backend: str = DEFAULT_BACKEND
    precision: str = DEFAULT_PRECISION

    def __post_init__(self) -> None:
        """Refuse an unknown backend or precision, or a pair the backend cannot run."""
        backend, precision = self.backend, self.precision
        if backend not in BACKENDS:
            raise InvalidValue(
                f"unknown {opt('backend', repr(backend))}. Valid: {', '.join(BACKENDS)}"
            )
        if precision not in PRECISIONS:
            raise InvalidValue(
                f"unknown {opt('precision', repr(precision))}. Valid: {', '.join(PRECISIONS)}"
            )
        if precision not in SUPPORTED[backend]:
            raise ConflictingOptions(
                f"{opt('backend', backend)} runs {opt('precision', ' or '.join(SUPPORTED[backend]))}, "
                f"not {precision}; use {opt('backend', 'torch')} for {precision}"
            )

    def with_model(self, model: str) -> EmbeddingSpec:
        """The same runtime for another model (a build's check models)."""
        return replace(self, model=model)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MetricSpec:
    """How Familiarity and the label scores are read: the top `k` similarities with their
    `weighting`, the entropy score's `temperature`, the bootstrap `seed` (a build's seeded
    draws too) and the `protocol` (ours, or the Familiarity authors')."""

    k: int = K
    weighting: str = WEIGHTING
    temperature: float = TEMPERATURE
    seed: int = SEED
    protocol: str = DEFAULT_PROTOCOL

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise InvalidValue(
                f"unknown weighting {self.weighting!r}. Valid: {', '.join(WEIGHTINGS)}"
            )
        if self.protocol not in PROTOCOLS:
            raise InvalidValue(f"unknown protocol {self.protocol!r}. Valid: {', '.join(PROTOCOLS)}")
        if self.k < 1:
            raise InvalidValue(f"{opt('k')} must be >= 1, got {self.k}")
        if self.temperature <= 0:
            raise InvalidValue(f"temperature must be > 0, got {self.temperature}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The specs a request may hold, by the name of its field.
SPECS: dict[str, type[EmbeddingSpec] | type[MetricSpec]] = {
    "embedding": EmbeddingSpec,
    "metric": MetricSpec,
}


def spec_fields(kind: type[EmbeddingSpec] | type[MetricSpec]) -> tuple[str, ...]:
    """A spec's field names: its flat keys."""
    return tuple(f.name for f in fields(kind))


def split_flat(values: Mapping[str, Any], specs: tuple[str, ...]) -> dict[str, Any]:
    """Flat keys (`model`, `k`, ...; as scenarios.toml and build.json hold them) folded into
    the `specs` named (`embedding`, `metric`): a spec given whole is kept, and naming one of
    its fields beside it is refused (which would win is not obvious)."""
    out = dict(values)
    for name in specs:
        kind = SPECS[name]
        own = {key: out.pop(key) for key in spec_fields(kind) if key in out}
        if name in out and own:
            raise ConflictingOptions(
                f"{name}= and {', '.join(sorted(own))}= both given: set them in the "
                f"{kind.__name__} alone"
            )
        if name not in out:
            out[name] = kind(**own)
    return out


def flat(values: Mapping[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """A request's fields with its specs spelt out in their flat keys, in `order` (the keys
    named there first, in that order; any other after, as they come)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, (EmbeddingSpec, MetricSpec)):
            out.update(value.to_dict())
        else:
            out[key] = value
    first = {key: out[key] for key in order if key in out}
    return first | {key: v for key, v in out.items() if key not in first}
