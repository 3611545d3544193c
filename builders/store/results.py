"""What an ingest did, per split and for the source, as `ingest` prints it and `--json` holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def _total(count: str) -> Any:
    """A property: the splits' sum of `count`."""
    return property(lambda self: sum(getattr(s, count) for s in self.splits))


@dataclass
class SplitResult:
    split: str
    files: list[str]
    status: str  # "ingested" | "appended" | "unchanged"
    sentences: int
    mentions: int
    negatives: int
    negative_spans: int
    types: int
    report: dict[str, Any] = field(default_factory=dict)


@dataclass
class IngestResult:
    source: str
    kind: str
    status: str  # "ingested" | "appended" | "unchanged"
    splits: list[SplitResult]
    types: int = 0
    notes: list[str] = field(default_factory=list)

    sentences = _total("sentences")
    mentions = _total("mentions")
    negatives = _total("negatives")
    negative_spans = _total("negative_spans")

    def to_dict(self) -> dict[str, Any]:
        keys = ("sentences", "mentions", "negatives", "negative_spans", "types")
        return {
            "source": self.source,
            "kind": self.kind,
            "status": self.status,
            **{k: getattr(self, k) for k in keys},
            "notes": self.notes,
            "splits": {
                s.split: {
                    "status": s.status,
                    "files": s.files,
                    **{k: getattr(s, k) for k in keys},
                    "report": s.report,
                }
                for s in self.splits
            },
        }
