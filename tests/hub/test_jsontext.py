"""`dumps_indented` writes `json.dumps(..., indent=...)`'s text exactly: build.json's bytes
(and so build ids, manifests and the cards read from it) must not move with the faster writer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders.hub.folder import _default, write_json
from builders.hub.jsontext import dumps_indented

LABELS = [
    "person",
    "café",
    "東京 tower",
    'naïve "quoted" \\ label',
    "tab\there",
    "emoji 🙂",
    "%s 100%",
]


def build_like() -> dict[str, Any]:
    """A build.json's shape: nested config, per-label records (some long), floats of every
    kind, non-ASCII labels, tuples, empty containers and NumPy values (through `default`)."""
    labels = [
        {"label": f"{LABELS[i % len(LABELS)]} {i}", "mentions": 10_000 - i} for i in range(300)
    ]
    per_label = [
        {"benchmarks": ["crossner-ai"], "familiarity": 1 / (i + 3), "label": lab}
        for i, lab in enumerate(LABELS)
    ]
    return {
        "build": {"id": "a9bb185794790f1f", "levels": {"x-low-shift": "db92" * 16}},
        "config": {
            "benchmarks": ("crossner-ai", "mit-movie"),
            "check_model": [],
            "k": 1000,
            "label_map": None,
            "leakage": False,
            "temperature": 0.01,
            "levels": {},
        },
        "cuts": {
            "high": {"mentions": [1875867, 2813762], "planned_familiarity": 0.3334260325935816}
        },
        "floats": [0.0, -0.0, 1e-20, 1.5e300, 2.0, 0.1 + 0.2, math.nan, math.inf, -math.inf],
        "labels": labels,
        "numpy": {"vec": np.arange(3, dtype=np.int64), "f": np.float64(0.25), "i": np.int32(7)},
        "per_label": per_label,
        "records_mixed": [{"a": 1, "b": None}, {"a": True, "b": 2.5}, {"a": "x", "b": "ü"}],
        "records_unlike": [{"a": 1}, {"b": 2}, {"a": 1, "b": 2}, {"b": 1, "a": 2}, {}],
        "records_nested": [{"a": [1, 2]}, {"a": {"z": 1, "y": [{}]}}],
        "records_subclass": [{"a": np.float64(0.5)}, {"a": np.float64(1.5)}],
        5: "int key",
        2.5: "float key",
        True: "bool key",
        None: "none key",
    }


@pytest.mark.parametrize("sort_keys", [True, False])
@pytest.mark.parametrize("indent", [2, 0, 4])
def test_it_writes_json_dumps_text_on_build_shaped_data(sort_keys: bool, indent: int) -> None:
    obj = build_like()
    if sort_keys:  # json cannot sort keys of mixed types either
        obj = {str(k) if not isinstance(k, str) else k: v for k, v in obj.items()}
    want = json.dumps(obj, indent=indent, sort_keys=sort_keys, default=_default)
    assert dumps_indented(obj, indent=indent, sort_keys=sort_keys, default=_default) == want


def test_unsorted_records_keep_each_dicts_own_key_order() -> None:
    obj = [{"b": 1, "a": 2}, {"a": 3, "b": 4}, {"b": 5, "a": 6}]
    for sort_keys in (True, False):
        assert dumps_indented(obj, sort_keys=sort_keys) == json.dumps(
            obj, indent=2, sort_keys=sort_keys
        )


def test_write_json_writes_the_same_bytes_as_json(tmp_path: Path) -> None:
    obj = {k: v for k, v in build_like().items() if isinstance(k, str)}
    write_json(tmp_path / "build.json", obj)
    want = json.dumps(obj, indent=2, sort_keys=True, default=_default) + "\n"
    assert (tmp_path / "build.json").read_bytes() == want.encode()


def test_it_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"a": object()})
    with pytest.raises(TypeError, match="keys must be"):
        dumps_indented({(1, 2): 1})
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(loop)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=8)
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.text(max_size=5), inner, max_size=5),
        st.lists(st.fixed_dictionaries({"label": st.text(max_size=6), "n": scalars}), max_size=5),
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(documents, st.booleans())
def test_it_matches_json_on_any_document(doc: Any, sort_keys: bool) -> None:
    assert dumps_indented(doc, sort_keys=sort_keys) == json.dumps(
        doc, indent=2, sort_keys=sort_keys
    )
