"""What regenerating one scenario did: `ScenarioReport` (reused, built, rebuilt or skipped)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ScenarioReport:
    name: str
    status: str  # reused | built | rebuilt | skipped
    folders: list[str] = field(default_factory=list)
    reason: str = ""
    ingest: str | None = None
    key: str | None = None
    changes: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    labels_added: dict[str, list[str]] = field(default_factory=dict)
    labels_removed: dict[str, list[str]] = field(default_factory=dict)
    published: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line per folder of what changed, e.g. `low: rows 120 -> 98, familiarity ...`."""
        if self.status in ("reused", "skipped"):
            return self.reason
        parts = []
        for folder, metrics in self.changes.items():
            if all(a is None for a, _ in metrics.values()):  # a first build: the headline only
                head = [
                    f"{m} {_fmt(b)}"
                    for m, (_, b) in metrics.items()
                    if m.split()[-1] in ("rows", "labels")
                    or m in ("familiarity",)
                    or m.endswith(" familiarity")
                ]
                parts.append(f"{folder}: {', '.join(head)}")
                continue
            diffs = [f"{m} {_fmt(a)} -> {_fmt(b)}" for m, (a, b) in metrics.items() if a != b]
            added, removed = self.labels_added.get(folder), self.labels_removed.get(folder)
            if added:
                diffs.append("+" + ", +".join(added[:5]) + (" ..." if len(added) > 5 else ""))
            if removed:
                diffs.append("-" + ", -".join(removed[:5]) + (" ..." if len(removed) > 5 else ""))
            parts.append(f"{folder}: {'; '.join(diffs) if diffs else 'no change in the numbers'}")
        return (self.reason + "\n" if self.reason else "") + "\n".join(parts)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)
