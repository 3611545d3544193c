"""Atomic folder and file writes: a reader sees the old or the new content, never a mix."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders.files import atomic_write_text
from builders.hub import folder as hubfolder
from builders.hub.folder import atomic_dir


def _tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()
    }


def no_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    """A system without renameat2's RENAME_EXCHANGE: the old folder is renamed away first."""
    from builders.hub import outdir

    monkeypatch.setattr(outdir, "exchange", lambda a, b: False)
    monkeypatch.setattr(hubfolder, "exchange", lambda a, b: False)


@pytest.mark.parametrize("exchange", [True, False])
def test_atomic_dir_replaces_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    if not exchange:
        no_exchange(monkeypatch)
    target = tmp_path / "repo" / "entropy"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("one")
    with atomic_dir(target) as tmp:
        (tmp / "b.txt").write_text("two")
    assert _tree(target) == {"b.txt": "two"}
    assert sorted(p.name for p in target.parent.iterdir()) == ["entropy"]  # no temp left
    assert oct(target.stat().st_mode & 0o777) != oct(0o700)


def test_atomic_dir_failure_keeps_the_old_folder(tmp_path: Path) -> None:
    target = tmp_path / "entropy"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("one")
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("half")
        raise RuntimeError("build failed")
    assert _tree(target) == {"a.txt": "one"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entropy"]


def test_fallback_puts_the_old_folder_back_when_the_swap_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "entropy"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("one")
    no_exchange(monkeypatch)
    real_replace = hubfolder.os.replace

    def flaky(src, dst):  # type: ignore[no-untyped-def]
        if Path(dst) == target and ".old." not in str(src):
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(hubfolder.os, "replace", flaky)
    with pytest.raises(OSError, match="disk full"), atomic_dir(target) as tmp:
        (tmp / "b.txt").write_text("two")
    monkeypatch.setattr(hubfolder.os, "replace", real_replace)
    assert _tree(target) == {"a.txt": "one"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entropy"]


def test_atomic_write_text_leaves_no_temp_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "README.md"
    atomic_write_text(path, "old\n")
    monkeypatch.setattr(hubfolder.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError("no")))
    with pytest.raises(OSError):
        atomic_write_text(path, "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]


def test_dataset_sizes_are_load_datasets_own_figures(tmp_path: Path) -> None:
    """Several files, several row groups of unequal sizes, nested and non-ASCII values: the
    split sizes equal those `load_dataset` records when it loads the same files."""
    import random

    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    from builders.hub.folder import dataset_sizes, subset_features

    rnd = random.Random(1)
    rows = []
    for i in range(1000):
        toks = [rnd.choice(["a", "bb", "ccc", "Ü", "日本"]) for _ in range(rnd.randint(0, 40))]
        spans = [{"start": j, "end": j + 1, "label": rnd.choice(["x", "yy"])}
                 for j in range(0, len(toks), 7)]  # fmt: skip
        rows.append({"id": str(i), "tokens": toks, "spans": spans,
                     "negatives": ["q"] * (i % 3), "negative_spans": spans[:1]})  # fmt: skip
    table = pa.Table.from_pylist(rows).cast(subset_features().arrow_schema)
    files = []
    for k, group in enumerate([7, 100, 333]):
        files.append(tmp_path / f"f{k}.parquet")
        pq.write_table(table, files[-1], row_group_size=group, compression="zstd")
    data_files = {"train": files[:2], "test": files[2:]}
    ours = dataset_sizes(data_files, subset_features())
    loaded = datasets.load_dataset(
        "parquet",
        data_files={s: [str(p) for p in fs] for s, fs in data_files.items()},
        features=subset_features(),
        cache_dir=str(tmp_path / "cache"),
    )
    assert {s: ours[s] for s in loaded} == {
        s: d.info.splits[s].num_bytes for s, d in loaded.items()
    }
    assert ours["download_size"] == sum(p.stat().st_size for p in files)


def test_parquet_bytes_do_not_depend_on_how_the_rows_were_batched(tmp_path: Path) -> None:
    """A vocabulary large enough for the writer to fall back from dictionary encoding in the
    middle of a row group: the bytes are the same whatever batches the rows came in (a build
    streams them from DuckDB; `write_parquet` writes a table)."""
    import random

    import pyarrow as pa

    from builders.hub.folder import subset_features, write_parquet, write_parquet_batches

    rnd = random.Random(0)
    n = 130_000
    schema = subset_features().arrow_schema
    table = pa.table(
        {
            "id": [str(i) for i in range(n)],
            "tokens": [
                [f"w{rnd.randrange(400_000)}" for _ in range(rnd.randint(1, 12))] for _ in range(n)
            ],
            "spans": pa.array([[]] * n, schema.field("spans").type),
            "negatives": pa.array([[]] * n, schema.field("negatives").type),
            "negative_spans": pa.array([[]] * n, schema.field("negative_spans").type),
        }
    )
    write_parquet(table, tmp_path / "whole.parquet", subset_features())
    for rows in (7_777, 100_000):
        path = tmp_path / f"{rows}.parquet"
        batches = table.to_batches(max_chunksize=rows)
        assert write_parquet_batches(table.schema, batches, path, subset_features()) == n
        assert path.read_bytes() == (tmp_path / "whole.parquet").read_bytes(), rows
