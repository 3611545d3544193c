"""The guard of an ingest that replaces a source's whole input (`prepare_source(exact=True)`).

Files gone from a scenario's `path` leave the store too: a retired shard, or a folder copied in
part (a sync not finished, a mount missing). So a split removed whole, or a source whose
sentences fall by more than half, is refused unless the caller accepts it (regenerate's
`--allow-shrink SOURCE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from builders.defaults import split_rank
from builders.errors import IngestRefused
from builders.store.catalogue import StoredSplit


@dataclass
class ShrinkGuard:
    """The refusal of an `exact` ingest that would shrink what is stored past belief; `fix`
    names what accepts it."""

    source: str
    fix: str

    def before_reading(
        self,
        stored: Mapping[str, StoredSplit],
        jobs: Mapping[str, list[tuple[str, str]]],
        unchanged: list[str],
        dropped: list[str],
    ) -> None:
        """Refuse what is known before reading: splits gone, and the sentences left when
        every input to read (`jobs`: split -> its (input, fingerprint)s) is one already
        stored unchanged, whose count the store has."""
        lines = [
            f"{self.source}/{split}: no longer in the input; it holds "
            f"{stored[split].sentences:,} sentences from {_inputs(stored[split])}, "
            "which replacing what is stored would remove"
            for split in dropped
        ]
        after: dict[str, int] | None = {s: stored[s].sentences for s in unchanged}
        for split, inputs in jobs.items():
            old = stored[split].inputs if split in stored else []
            known = {(i["input"], i["fingerprint"]): i["sentences"] for i in old}
            counts = [known.get(i) for i in inputs]
            if after is None or None in counts:
                after = None
                continue
            after[split] = sum(n for n in counts if n is not None)
        fall = self._fall(stored, after) if after is not None else None
        if lines or fall:
            raise IngestRefused(self._message(lines + ([fall] if fall else [])))

    def after_reading(self, stored: Mapping[str, StoredSplit], read: Mapping[str, int]) -> None:
        """Refuse a fall by more than half once the changed inputs are read (`read`: the
        sentences of each split written; the others keep theirs)."""
        after = {s: v.sentences for s, v in stored.items()} | dict(read)  # none dropped
        fall = self._fall(stored, after)
        if fall:
            raise IngestRefused(self._message([fall]))

    def _fall(self, stored: Mapping[str, StoredSplit], after: Mapping[str, int]) -> str | None:
        before = sum(v.sentences for v in stored.values())
        now = sum(after.values())
        if not before or 2 * now >= before:
            return None
        per = ", ".join(
            f"{s} {stored[s].sentences if s in stored else 0:,} -> {after.get(s, 0):,}"
            for s in sorted(set(stored) | set(after), key=split_rank)
        )
        return (
            f"{self.source}: its input holds {now:,} sentences, the store {before:,} ({per}): "
            "replacing what is stored would drop more than half of them"
        )

    def _message(self, lines: list[str]) -> str:
        return "\n".join(lines) + (
            "\nA folder copied in part (a sync not finished) looks like this; nothing was "
            f"written. If the input is meant to shrink, {self.fix}"
        )


def _inputs(old: StoredSplit) -> str:
    return listing(
        [f"{i['input'].rstrip('/').rsplit('/', 1)[-1]} ({i['sentences']:,})" for i in old.inputs], 3
    )


def listing(names: list[str], shown: int) -> str:
    """The first `shown` names, and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
