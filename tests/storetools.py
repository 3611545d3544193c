"""Helpers shared by tests that check what the span store holds."""

from __future__ import annotations

from builders.store import Store


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
