"""The one verbaliser of raw tags (METHOD.md section 6): the label map, the packaged table, the
natural-language keys a source of natural-language labels keeps."""

from __future__ import annotations

import pytest

from builders.errors import BuildersError
from builders.labels import benchmarks, label_map, natural_keys, table_label, verbalise


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("PER", "person"),
        ("LOC", "location"),
        ("ORG", "organization"),
        ("MISC", "else"),
        ("RATINGS_AVERAGE", "average ratings"),
        ("ratings average", "average ratings"),  # the normalised spelling reads the same
        ("Restaurant_Name", "restaurant name"),
        ("programlang", "program language"),
        ("organisation", "organization"),
        ("person", "person"),
        ("GPE", "gpe"),  # not in the table: normalised
        ("field of study", "field of study"),
    ],
)
def test_tags_are_verbalised_by_the_table(raw: str, label: str) -> None:
    assert verbalise(raw) == label


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("per", "person"),  # a tag no label text spells so: verbalised in every source
        ("org", "organization"),
        ("misc", "else"),
        ("organisation", "organisation"),  # a natural-language key of the table: kept
        ("Organisation", "organisation"),
        ("person", "person"),
        ("location", "location"),
        ("average ratings", "average ratings"),
        ("Restaurant Name", "restaurant name"),
    ],
)
def test_natural_language_labels_keep_the_tables_natural_keys(raw: str, label: str) -> None:
    assert verbalise(raw, natural=True) == label


def test_the_label_map_comes_first() -> None:
    mapping = label_map({"PER": "Human", "Gpe": "geo-political entity"})
    assert mapping == {"per": "human", "gpe": "geo-political entity"}
    assert verbalise("PER", mapping) == "human"
    assert verbalise("per", mapping, natural=True) == "human"
    assert verbalise("GPE", mapping) == "geo-political entity"
    assert verbalise("LOC", mapping) == "location"  # the table serves the rest


def test_a_label_map_refuses_empty_and_conflicting_labels() -> None:
    with pytest.raises(BuildersError, match=r"label map: the label of 'PER' is empty"):
        label_map({"PER": "  "})
    with pytest.raises(BuildersError, match=r"'Per' is the tag 'per', already mapped to 'person'"):
        label_map({"PER": "person", "Per": "human"})
    assert label_map({"PER": "person", "per": "Person"}) == {"per": "person"}


def test_natural_keys_are_keys_of_the_table() -> None:
    assert natural_keys() == {"organisation"}
    assert all(table_label(k) is not None for k in natural_keys())
    assert table_label("PER") == "person" and table_label("GPE") is None


def test_every_packaged_tag_reads_the_same_as_a_training_tag() -> None:
    """A benchmark's tags and the same tags in a training file get one label each."""
    for bench in benchmarks().values():
        for tag in bench.tags:
            assert verbalise(tag) == verbalise(tag.upper()) == verbalise(tag.lower())
