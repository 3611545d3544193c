"""What regenerating one scenario did: `ScenarioReport` (reused, built, rebuilt or skipped)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from builders.names import quoted


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
    #: What changed in the inputs since the last build (`hub.changelog.input_changes`).
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: folder -> {"moved_in": {label: level before}, "moved_out": {label: level after}}
    moved: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: The models of the scenario's key: name, weights' hash, the runtime that embeds.
    models: list[dict[str, Any]] = field(default_factory=list)
    #: Per source read from the Hub: {"splits": {split: commit stored}, "checked": whether
    #: the Hub was asked for its newest commit this run (False: it could not be reached)}.
    revisions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The reason, one line per changed input split and one per folder of what changed
        (`low: rows 120 -> 98, ...; moved: "medium" from high`), then the notes."""
        from builders.hub.changelog import describe_inputs

        if self.status in ("reused", "skipped"):
            return [self.reason, *self.notes]
        parts = [self.reason] if self.reason else []
        parts += [f"input {x}" for x in describe_inputs(self.inputs)]
        for folder, metrics in self.changes.items():
            if all(a is None for a, _ in metrics.values()):  # a first build: the headline only
                head = [
                    f"{m} {_fmt(b)}"
                    for m, (_, b) in metrics.items()
                    if m.split()[-1] in ("rows", "labels", "familiarity")
                ]
                parts.append(f"{folder}: {', '.join(head)}")
                continue
            moved_m = [m for m, (a, b) in metrics.items() if a != b]
            per_bench = [m for m in moved_m if m.startswith("familiarity ")]
            diffs = [f"{m} {_fmt(metrics[m][0])} -> {_fmt(metrics[m][1])}" for m in moved_m
                     if m not in per_bench]  # fmt: skip
            if per_bench:  # each benchmark's figure: in --json and the card's changelog
                diffs.append(f"familiarity moved on {len(per_bench)} benchmark(s)")
            added, removed = self.labels_added.get(folder), self.labels_removed.get(folder)
            for sign, labels in (("+", added), ("-", removed)):  # quoted: a label may hold ", "
                if labels:
                    shown = ", ".join(sign + quoted(lab) for lab in labels[:5])
                    diffs.append(shown + (" ..." if len(labels) > 5 else ""))
            moved = self.moved.get(folder) or {}
            for key, word in (("moved_in", "from"), ("moved_out", "to")):
                pairs = sorted((moved.get(key) or {}).items())
                if pairs:
                    shown = ", ".join(f"{quoted(lab)} {word} {lv}" for lab, lv in pairs[:5])
                    diffs.append(f"moved: {shown}" + (" ..." if len(pairs) > 5 else ""))
            parts.append(f"{folder}: {'; '.join(diffs) if diffs else 'no change in the numbers'}")
        return parts + self.notes


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)
