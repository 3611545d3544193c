"""Any Hugging Face dataset with a tokens column and a tag-sequence column.

    {"tokens": ["EU", "rejects", "German", "call"], "ner_tags": [3, 0, 7, 0]}       ClassLabel ids
    {"tokens": ["Apple", "Inc", "."], "ner_tags": ["B-company", "I-company", "O"]}   plain strings
    {"tokens": ["Paris", "is", "big"], "fine_ner_tags": ["location-GPE", "O", "O"]}  IO, bare types

`dataset` is a Hub id (online), a `save_to_disk` folder, or a folder of parquet / json / csv
files (splits from their names). A Hub dataset is read at the commit resolved when the read is
planned (`resolve_revision`), carried by `DatasetSplit.revision` and recorded by the store;
offline, a revision that is not a commit is read as given, with a note.

ClassLabel ids become their names and tags are decoded as in column files (`columns._decode`:
the same schemes and `repair`); `scheme="auto"` decides per split from the tag names. Errors
name the dataset, split and 0-based row (`ds[split][i]`) in place of a line:
`DFKI-SLT/few-nerd[supervised]/train:17: ...`.

    builders ingest hf --path extraordinarylab/cross-ner -o config=ai --name crossner-ai-hub
    # Few-NERD: `ner_tags` holds the 8 coarse types, `fine_ner_tags` the 66 fine ones
    builders ingest hf --path DFKI-SLT/few-nerd -o config=supervised \\
        -o tags_column=fine_ner_tags --name fewnerd-supervised
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from builders.defaults import canonical_split
from builders.errors import (
    HubUnreachable,
    InputError,
    InvalidValue,
    SourceFormatError,
    reader_opt,
)
from builders.sources.base import DatasetSplit, Example, ReadReport, dataset_name
from builders.sources.columns import _decode
from builders.sources.layout import check_io, column_stats, detect_scheme, scheme_of
from builders.sources.options import ReaderOptions, option

BATCH_ROWS = 1_000
_COMMIT = re.compile(r"[0-9a-f]{40}")


def is_commit(revision: str | None) -> bool:
    """A full commit sha (a branch or tag moves, a commit does not)."""
    return revision is not None and bool(_COMMIT.fullmatch(revision))


def hub_revision(dataset: str, revision: str | None = None) -> str:
    """The commit of the Hub dataset `dataset` at `revision` (default its main branch); a
    `HubUnreachable` offline, without a connection, on a timeout, a server error or a 429; an
    `InputError` for no such dataset or revision, no access to it, or any other failure."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    where = dataset + (f"@{revision}" if revision else "")
    try:
        sha = HfApi().dataset_info(dataset, revision=revision).sha
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
        raise InputError(
            f"{where}: no such dataset or revision on the Hub, or no access to it "
            f"({type(exc).__name__}): check the dataset id and the revision"
        ) from exc
    except Exception as exc:  # the Hub client raises many unrelated types
        first = str(exc).splitlines()[0] if str(exc) else ""
        text = f"{where}: the Hub cannot be reached ({type(exc).__name__}: {first})"
        if _unreachable(exc):
            raise HubUnreachable(text) from exc
        # any other failure (a 401/403, a bug) is refused, not taken for being offline
        raise InputError(text.replace("cannot be reached", "did not answer")) from exc
    if not sha:
        raise InputError(f"{where}: the Hub gave no commit for it")
    return str(sha)


def _unreachable(exc: Exception) -> bool:
    """Offline, a failed connection or timeout (stdlib or HTTP client types), a 5xx or 429."""
    if isinstance(exc, (ConnectionError, TimeoutError)):  # OfflineModeIsEnabled is one
        return True
    if {"TransportError", "TimeoutException"} & {c.__name__ for c in type(exc).__mro__}:
        return True
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return isinstance(status, int) and (status >= 500 or status == 429)


def resolve_revision(dataset: str, revision: str | None) -> tuple[str | None, list[str]]:
    """The revision a read of `dataset` loads and records, and notes: None for a local
    folder, a commit as given, else the Hub's commit for `revision`; offline, `revision` as
    given, with a note. A revision for a local folder is refused."""
    if _is_local(dataset):
        if revision is not None:
            raise InvalidValue(
                f"{dataset}: a revision pins a Hub dataset, and this is a local folder: "
                "give no revision"
            )
        return None, []
    if is_commit(revision):
        return revision, []
    try:
        return hub_revision(dataset, revision), []
    except HubUnreachable as exc:
        known = f"its id and revision {revision!r}" if revision else "its id alone"
        return revision, [f"{exc}: its commit is not recorded, the input is known by {known}"]


def available_splits(
    dataset: str, config: str | None, split: str | None = None, revision: str | None = None
) -> list[str]:
    """The dataset's split names as published (`validation`, not `dev`), optionally one of
    them; an InputError when it cannot be loaded or has no such split."""
    if _is_local(dataset):
        names = list(_load_local(dataset))
    else:
        import datasets

        try:
            names = list(datasets.get_dataset_split_names(dataset, config, revision=revision))
        except Exception as exc:  # the Hub client raises many unrelated types
            raise InputError(_load_failure(dataset, config, exc)) from exc
    if split is None:
        return names
    want = canonical_split(split)
    hits = [n for n in names if canonical_split(n) == want]
    if not hits:
        raise InputError(
            f"{dataset_name(dataset, config)}: no split {split!r} (available: {', '.join(names) or 'none'})"
        )
    return hits


def discover(
    dataset: str, config: str | None, split: str | None = None, revision: str | None = None
) -> dict[str, list[DatasetSplit]]:
    """The dataset's splits as units for `read`, by canonical split name (`dev`)."""
    path = Path(dataset)
    files = tuple(sorted(p for p in path.rglob("*") if p.is_file())) if path.is_dir() else ()
    return {
        canonical_split(name): [DatasetSplit(dataset, config, name, files, revision)]
        for name in available_splits(dataset, config, split, revision)
    }


def is_dataset_folder(path: Path) -> bool:
    """A folder written by `save_to_disk` (a Dataset or a DatasetDict)."""
    return (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()


@dataclass(frozen=True)
class Options(ReaderOptions):
    tokens_column: str = option("tokens", "the column holding the tokens")
    tags_column: str = option("ner_tags", "the column holding the tags (ClassLabel ids or strings)")
    scheme: Literal["auto", "bio", "bioes", "io"] = option(
        "auto", "tag scheme; auto: decided per split from the tag names"
    )
    repair: bool = option(False, "read an I-x that opens an entity as B-x, and count it")
    config: str | None = option(None, "the Hub config (subset) to read")


def read(unit: DatasetSplit, report: ReadReport, **options: object) -> Iterator[Example]:
    """Yield every row of one split as an example (`line` = the 0-based row); other columns
    are counted and named in the report."""
    opts = Options.parse(options, "hf")
    tokens_column, tags_column, scheme = opts.tokens_column, opts.tags_column, opts.scheme
    ds = _load_split(unit.dataset, unit.config, unit.split, unit.revision)
    where = Path(str(unit))
    columns = list(ds.column_names)
    for key, name in (("tokens_column", tokens_column), ("tags_column", tags_column)):
        if name not in columns:
            raise InputError(
                f"{where}: no column {name!r} (available columns: {', '.join(columns)}); "
                f"choose one with {reader_opt(key, '<column>')}"
            )
    names = _tag_names(ds.features[tags_column], where, tags_column)
    others = [c for c in columns if c not in (tokens_column, tags_column)]
    ds = ds.select_columns([tokens_column, tags_column])
    if scheme == "auto":
        if names is not None:
            scheme = detect_scheme(names)
        else:
            tokens, tags = _string_stats(ds, where, tokens_column, tags_column)
            scheme = scheme_of(tags.prefixes)
            if scheme == "io":  # words read as IO types: swapped or wrong columns
                fix = "choose the columns with " + " ".join(
                    reader_opt(key, "...") for key in ("tokens_column", "tags_column")
                )
                check_io(where, tokens, tags, f"column {tags_column!r}", fix)
        report.note(f"{where}: tag scheme detected as {scheme.upper()}")
    row = 0
    for batch in _batches(ds, where, BATCH_ROWS):
        for tokens, tags in zip(batch[tokens_column], batch[tags_column], strict=True):
            if names is not None:
                try:
                    if tags and min(tags) < 0:  # -1 padding would index from the end
                        raise IndexError
                    tags = [names[t] for t in tags]
                except (IndexError, TypeError):
                    bad = next(t for t in tags if not isinstance(t, int) or not 0 <= t < len(names))
                    raise SourceFormatError(
                        where, row, f"tag id outside the ClassLabel's {len(names)} names", bad
                    ) from None
            if len(tags) != len(tokens):
                raise SourceFormatError(
                    where, row, f"{len(tags)} tags for {len(tokens)} tokens (row {row})", tags
                )
            try:
                ex = _decode(where, 0, list(tokens), tags, scheme, opts.repair, report)  # type: ignore[arg-type]
            except SourceFormatError as exc:  # its line is the token index: report the row
                raise SourceFormatError(
                    where, row, f"token {exc.line}: {exc.message} (row {row})", exc.value
                ) from None
            ex.line = row
            yield ex
            row += 1
    report.not_kept(str(unit), "columns", Counter(dict.fromkeys(others, row)))


def _tag_names(feature: Any, where: Path, column: str) -> list[str] | None:
    """The ClassLabel names of a tag-sequence column, or None for string tags."""
    from datasets import ClassLabel, Value

    inner = getattr(feature, "feature", None)
    if inner is None:
        raise InputError(f"{where}: column {column!r} is not a sequence of tags ({feature})")
    if isinstance(inner, ClassLabel):
        return list(inner.names)
    if isinstance(inner, Value) and inner.dtype in ("string", "large_string"):
        return None
    raise InputError(
        f"{where}: column {column!r} holds {inner}, expected ClassLabel ids or strings"
    )


def _batches(ds: Any, where: Path, size: int) -> Iterator[dict[str, list]]:
    """`ds.iter(size)`, text that is not UTF-8 a `SourceFormatError` naming the batch's rows."""
    row = 0
    it = ds.iter(batch_size=size)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            bad = exc.object[exc.start : exc.end]
            raise SourceFormatError(
                where,
                row,
                f"not UTF-8 (byte {bytes(bad).hex(' ')}) in rows {row}..{row + size - 1}",
            ) from None
        yield batch
        row += size


def _string_stats(ds: Any, where: Path, tokens: str, tags: str) -> tuple[Any, Any]:
    """The values of the tokens and the (string) tags of a split, as layout evidence."""

    def values(column: str) -> Iterator[str]:
        for batch in _batches(ds.select_columns([column]), where, BATCH_ROWS * 10):
            for row in batch[column]:
                yield from row

    return column_stats(values(tokens)), column_stats(values(tags))


def _is_local(dataset: str) -> bool:
    return Path(dataset).exists()


def _load_local(folder: str) -> Any:
    """A local folder as a DatasetDict, loaded again when a file's name, size or mtime changed."""
    path = Path(folder)
    files = sorted([path, *path.iterdir()] if path.is_dir() else [path])
    stats = [(f.name, f.stat()) for f in files]
    return _load_local_cached(folder, tuple((n, s.st_size, s.st_mtime_ns) for n, s in stats))


@lru_cache(maxsize=4)
def _load_local_cached(folder: str, signature: tuple[tuple[str, int, int], ...]) -> Any:
    import datasets

    path = Path(folder)
    try:
        if is_dataset_folder(path):
            loaded = datasets.load_from_disk(folder)
        else:
            loaded = datasets.load_dataset(folder)
    except Exception as exc:  # datasets raises many types for an unreadable folder
        raise InputError(_load_failure(folder, None, exc)) from exc
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({str(loaded.split or "train"): loaded})
    return loaded


def _load_split(dataset: str, config: str | None, split: str, revision: str | None) -> Any:
    if _is_local(dataset):
        loaded = _load_local(dataset)
        if split not in loaded:
            raise InputError(f"{dataset}: no split {split!r} (available: {', '.join(loaded)})")
        return loaded[split]
    import datasets

    try:
        return datasets.load_dataset(dataset, config, split=split, revision=revision)
    except Exception as exc:
        raise InputError(_load_failure(dataset, config, exc)) from exc


def _load_failure(dataset: str, config: str | None, exc: Exception) -> str:
    return (
        f"{dataset_name(dataset, config)}: cannot load the dataset ({type(exc).__name__}: {exc}); "
        "give a Hub id (online), a save_to_disk folder or a folder of parquet/json files"
    )
