"""What tests share besides fixtures: the test-data paths and a snapshot of the store."""

from __future__ import annotations

import os
from pathlib import Path

from builders.store import Store

TESTS = Path(__file__).parent
DATA = TESTS / "data"
SHARED = Path(os.environ.get("LABELSHIFT_SHARED_DATA", TESTS.parent.parent / "shared" / "data"))


def snapshot(store: Store) -> list:
    """Every stored row (sentences, mentions, negatives) and each split's fingerprint."""
    return [
        store.con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
        for t in ("sentences", "mentions", "negatives")
    ] + [
        store.con.execute(
            "SELECT source, split, fingerprint, n_sentences FROM sources ORDER BY ALL"
        ).fetchall()
    ]
