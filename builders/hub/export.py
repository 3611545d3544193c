"""Export to GLiNER's two json layouts, and to flair's column files.

Training json, from a built folder (a subset or a Few-NERD folder, local or on the Hub):

    [{"tokenized_text": ["Ada", "wrote", "code"], "ner": [[0, 0, "person"]],
      "ner_negatives": ["city"], "negative_ner": [[2, 2, "person"]]}, ...]
                                                ner, negative_ner = [start, end_inclusive, label]

Evaluation layout, from a benchmark in the span store (GLiNER's zero-shot benchmark folders,
`data/<name>/` in urchade/GLiNER, read by `gliner.evaluation.evaluate_ner.create_dataset`):

    DIR/train.json, dev.json, test.json   [{"sentence": "w1 w2 ...", "entities": [{"name": "w2",
                                            "type": "label", "pos": [char_start, char_end]}]}]
    DIR/labels.json                        ["label", ...]

flair's column files, from a built folder (`export_flair`; flair's `ColumnCorpus(DIR, {0: "text",
1: "ner"})` reads them):

    DIR/train.txt, dev.txt, test.txt   TOKEN<TAB>TAG per line (BIO tags), a blank line after
                                       each sentence; one file per split the folder has

The same input gives the same bytes; files are written beside their target and moved in.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, Literal, TextIO

from builders.defaults import canonical_split, config_order, hub_split, split_rank
from builders.errors import (
    ConflictingOptions,
    InputError,
    InvalidValue,
    OutputFolderError,
    SplitNotStored,
    opt,
)
from builders.files import atomic_open
from builders.hub.folder import atomic_dir, configs_of
from builders.hub.manifest import check_levels
from builders.hub.windows import Budget, Limits, Losses, Row, Span, TokenCount, cut_rows
from builders.names import is_hub_id
from builders.sources.gliner import NEGATIVE_SPANS_KEY

# GLiNER's trainer (urchade/GLiNER c2bb58dd, processor.py `batch_generate_class_mappings`;
# gliner 0.2.29 alike) adds a record's `ner_negatives` to its types instead of in-batch
# negatives: written only where a row has some. `ner_labels` (the whole candidate list) is never
# written: it would turn off GLiNER's shuffling and `max_types` cap.
NEGATIVES_KEY = "ner_negatives"
# Span-level negatives go under `negative_ner` (`NEGATIVE_SPANS_KEY`, what `ingest gliner` reads
# back); GLiNER reads records by key and ignores it.

#: GLiNER's evaluation file of each canonical split (`open_content` matches these names).
EVAL_FILES = {"train": "train.json", "dev": "dev.json", "test": "test.json"}
LABELS_FILE = "labels.json"
#: flair's column file of each split of a built folder (`find_train_dev_test_files` finds them).
FLAIR_FILES = {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"}
FORMATS = ("gliner", "flair")


@dataclass(frozen=True)
class ExportRequest:
    """What `builders export` writes to `out`: one of a built `folder` (local or ORG/NAME on
    the Hub), a stored `source` or a stored `benchmark`; None settings take their defaults.
    flair takes a `folder` only, every split of it."""

    out: Path
    folder: str | None = None
    source: str | None = None
    benchmark: str | None = None
    config: str | None = None
    split: str | None = None
    limits: Limits | None = None
    tokenizer: str | None = None
    format: Literal["gliner", "flair"] = "gliner"

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise InvalidValue(f"{opt('format', self.format)}: give one of {', '.join(FORMATS)}")
        given = [opt(k) for k in ("source", "benchmark", "split", "tokenizer") if getattr(self, k)]
        given += [f"the limits ({opt('max_words')}, ...)"] if self.limits else []
        if self.format == "flair" and given:
            raise ConflictingOptions(
                f"{', '.join(given)}: read by {opt('format', 'gliner')} only; "
                f"{opt('format', 'flair')} writes every split of FOLDER, whole"
            )
        if sum(x is not None for x in (self.folder, self.source, self.benchmark)) != 1:
            raise ConflictingOptions(
                f"give one of FOLDER (a built folder or Hub repo), {opt('source', 'NAME')} or "
                f"{opt('benchmark', 'SOURCE')}"
            )


def export(
    request: ExportRequest,
    open_store: Callable[[], AbstractContextManager[Any]] | None = None,
    *,
    on_note: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write what `request` asks; returns the `export-gliner --json` result. `open_store()`
    opens the span store read-only, only when needed (after the tokenizer loads: a wrong
    `--tokenizer` fails first); `on_note` hears where a folder was read from and its
    manifest check."""
    note = on_note or (lambda s: None)
    if request.benchmark is not None:
        assert open_store is not None, "a benchmark export reads the store"
        with open_store() as store:
            return export_gliner_benchmark(store, request.benchmark, request.out)
    if request.format == "flair":
        assert request.folder is not None
        where = _built_folder(request.folder, request.config, note)
        res = export_flair(where, request.config, request.out)
        return {"folder": request.folder, "config": request.config, **res}
    count = TokenCount(request.tokenizer)
    out, split, limits = request.out, request.split or "train", request.limits or Limits()
    if request.source is not None:
        assert open_store is not None, "a source export reads the store"
        with open_store() as store:
            res = export_gliner_source(
                store, request.source, out, split=split, limits=limits, count=count
            )
        return {"source": request.source, "split": split, "out": str(out), **res}
    assert request.folder is not None
    where = _built_folder(request.folder, request.config, note)
    res = export_gliner(where, request.config, out, split=split, limits=limits, count=count)
    return {
        "folder": request.folder,
        "config": request.config,
        "split": split,
        "out": str(out),
        **res,
    }


def _built_folder(folder: str, config: str | None, note: Callable[[str], None]) -> Path:
    """The folder to export: a local one, checked against the manifest its build wrote (the
    config to export, the folder's default when None), else the parquet files (`config`'s
    when given) of that Hub dataset repo, downloaded into the Hub cache."""
    where = Path(folder)
    if where.is_dir() or not is_hub_id(folder):
        if config is None and where.is_dir():
            config = next(iter(configs_of(where)), None)
        if config is not None:
            check_levels([where], config, note=lambda text: note(f"note: {text}"))
        return where
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    patterns = [f"{config}/*.parquet", "data/*.parquet"] if config else ["*.parquet"]
    try:
        found = snapshot_download(folder, repo_type="dataset", allow_patterns=patterns)
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
        raise InputError(
            f"{folder}: no such local folder, and the Hub dataset repo {folder!r} could not be "
            f"downloaded: {type(exc).__name__}: {exc}"
        ) from None
    note(f"{folder}: not a local folder; read from the Hub dataset repo {folder}")
    return Path(found)


def parquet_files(folder: Path, config: str | None = None, split: str = "train") -> list[Path]:
    """The parquet files of one config and split of a built folder (sorted)."""
    where, split = config_folder(Path(folder), config), hub_split(split)
    files = sorted(p for p in where.glob(f"{split}-*.parquet"))
    if not files:
        have = sorted({p.name.split("-")[0] for p in where.glob("*-*.parquet")})
        raise InputError(f"{where}: no {split}-*.parquet (splits: {', '.join(have) or 'none'})")
    return files


def config_folder(folder: Path, config: str | None) -> Path:
    """The folder of one config's parquet files (`data/` of a Few-NERD folder)."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder (expected a folder written by build-splits)")
    configs = config_order(
        p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.parquet"))
    )
    if (folder / "data").is_dir() and "data" in configs:  # Few-NERD layout: one default config
        if config not in (None, "default"):
            raise InputError(f"{folder}: has only the default config, not {config!r}")
        where = folder / "data"
    else:
        if not configs:
            raise InputError(f"{folder}: no config folder with parquet files")
        config = config or configs[0]
        if config not in configs:
            raise InputError(f"{folder}: no config {config!r}. Valid: {', '.join(configs)}")
        where = folder / config
    return where


def parquet_rows(files: list[Path]) -> Iterator[Row]:
    """One row per parquet row, in file order (`negatives` None where the row has none); a
    span outside its sentence or empty is an error, never repaired."""
    import pyarrow.parquet as pq

    for path in files:
        pf = pq.ParquetFile(path)
        names = set(pf.schema_arrow.names)
        if not {"tokens", "spans"} <= names:
            raise InputError(f"{path}: expected columns tokens and spans, got {sorted(names)}")
        optional = [c for c in ("negatives", "negative_spans") if c in names]
        columns = ["id", "tokens", "spans", *optional]
        yield from _rows(pf.iter_batches(batch_size=10_000, columns=columns), path)


def _rows(batches: Iterable[Any], path: Path | None = None) -> Iterator[Row]:
    """The rows of Arrow record batches (`Store.source_reader`'s, or a file's: `path`, named
    with the row's id in messages)."""
    for batch in batches:
        data = batch.to_pydict()
        none = [None] * batch.num_rows
        for rid, tokens, spans, neg, neg_spans in zip(
            data.get("id") or none,
            data["tokens"],
            data["spans"],
            data.get("negatives") or none,
            data.get("negative_spans") or none,
            strict=True,
        ):
            where = f"{path}: row {rid!r}" if path else ""
            yield Row(
                list(tokens),
                _checked(where, len(tokens), spans),
                list(neg) if neg else None,
                _checked(where, len(tokens), neg_spans or []),
                where,
            )


def parquet_labels(files: list[Path]) -> Iterator[str]:
    """The labels of the files' mentions (`spans`), each once per file."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    for path in files:
        spans = pq.read_table(path, columns=["spans"]).column("spans")
        labels = pc.struct_field(pc.list_flatten(spans), "label")
        yield from (str(x) for x in pc.unique(labels).to_pylist())


def _checked(where: str, n: int, spans: list[dict[str, Any]]) -> list[Span]:
    """`(start, end, label)` of each span, checked to lie inside the row's `n` tokens."""
    out = []
    for s in spans:
        start, end = int(s["start"]), int(s["end"])
        if not 0 <= start < end <= n:
            raise InputError(
                f"{where}: span [{start}, {end}) {s['label']!r} is outside its {n} tokens or empty"
            )
        out.append((start, end, s["label"]))
    return out


def gliner_record(row: Row) -> dict[str, Any]:
    """GLiNER's training record of a row: `end` inclusive; `ner_negatives` and `negative_ner`
    only where the row has some."""
    rec: dict[str, Any] = {
        "tokenized_text": row.tokens,
        "ner": [[s, e - 1, lab] for s, e, lab in row.spans],
    }
    if row.negatives:
        rec[NEGATIVES_KEY] = list(row.negatives)
    if row.negative_spans:
        rec[NEGATIVE_SPANS_KEY] = [[s, e - 1, lab] for s, e, lab in row.negative_spans]
    return rec


def write_training(
    rows: Iterator[Row],
    labels: Iterable[str],
    out: Path,
    limits: Limits | None = None,
    count: TokenCount | None = None,
) -> dict[str, Any]:
    """Write rows as GLiNER training json (atomically), cut into windows GLiNER keeps whole.
    `labels`: the export's mention labels (the batch negatives GLiNER may sample). Returns
    the counts written, the limits, `not_kept` (what GLiNER still drops of the windows) and
    `whole_rows` (what it would drop of the rows written whole)."""
    limits, count = limits or Limits(), count or TokenCount()
    budget = Budget(limits, count)
    budget.see_labels(iter(labels))
    counts = dict.fromkeys(
        ("rows", "windows", "rows_cut", "mentions", "negatives", "negative_spans"), 0
    )
    kept, whole = Losses(), Losses()
    with atomic_open(Path(out)) as fh:
        fh.write("[")
        for piece in cut_rows(rows, budget):
            counts["rows"] += 1
            counts["rows_cut"] += len(piece.windows) > 1
            kept.add(piece.kept)
            whole.add(piece.whole)
            for win in piece.windows:
                fh.write(",\n" if counts["windows"] else "\n")
                fh.write(
                    json.dumps(gliner_record(win), ensure_ascii=False, separators=(", ", ": "))
                )
                counts["windows"] += 1
                counts["mentions"] += len(win.spans)
                counts["negatives"] += len(win.negatives or ())
                counts["negative_spans"] += len(win.negative_spans)
        fh.write("\n]\n" if counts["windows"] else "]\n")
    return {
        **counts,
        "limits": {**asdict(limits), "tokens": count.describe()},
        "not_kept": kept.to_dict(),
        "whole_rows": whole.to_dict(),
    }


def export_gliner(
    folder: Path,
    config: str | None,
    out: Path,
    *,
    split: str = "train",
    limits: Limits | None = None,
    count: TokenCount | None = None,
) -> dict[str, Any]:
    """Write one config (None: the folder's default) and split of a subset or Few-NERD folder
    as GLiNER training json; returns `write_training`'s counts."""
    files = parquet_files(Path(folder), config, split)
    return write_training(parquet_rows(files), parquet_labels(files), out, limits, count)


def export_gliner_source(
    store: Any,
    source: str,
    out: Path,
    *,
    split: str = "train",
    limits: Limits | None = None,
    count: TokenCount | None = None,
) -> dict[str, Any]:
    """Write one split of a stored corpus as GLiNER training json, in corpus order, as
    `export_gliner` writes a folder (what `builders ingest gliner` reads back)."""
    store.require_source(source)
    stored = store.splits_of(source)
    name = canonical_split(split)
    if name not in stored:
        raise SplitNotStored(
            f"{opt('split', split)}: {source} has no such split. Stored: {', '.join(stored)}",
            source,
            split,
        )
    labels = store.split_labels(source, name)  # before the reader: one open result at a time
    with store.source_reader(source, name) as reader:
        return write_training(_rows(reader), labels, out, limits, count)


# ------------------------------------------------------------------------- evaluation layout
def eval_record(tokens: list[str], spans: list[tuple[int, int, str]], where: str) -> dict[str, Any]:
    """One GLiNER benchmark record: the tokens joined by spaces, each span as its characters
    (end exclusive) with its text and label. GLiNER splits the sentence on whitespace, so a
    token that is empty or holds whitespace is refused, naming `where`."""
    for t in tokens:
        if not t or any(c.isspace() for c in t):
            raise InputError(
                f"{where}: token {t!r} is empty or holds whitespace; GLiNER's evaluation layout "
                "splits sentences on whitespace, so it cannot be written"
            )
    starts = list(accumulate((len(t) + 1 for t in tokens), initial=0))
    sentence = " ".join(tokens)
    entities = []
    for a, b, label in spans:
        cs, ce = starts[a], starts[b - 1] + len(tokens[b - 1])
        entities.append({"name": sentence[cs:ce], "type": label, "pos": [cs, ce]})
    return {"sentence": sentence, "entities": entities}


def _write_list(fh: TextIO, items: Iterator[Any]) -> int:
    """`json.dumps(list(items), ensure_ascii=False)`, streamed: GLiNER's files' exact bytes."""
    fh.write("[")
    n = 0
    for item in items:
        fh.write(", " if n else "")
        fh.write(json.dumps(item, ensure_ascii=False))
        n += 1
    fh.write("]")
    return n


def export_gliner_benchmark(store: Any, source: str, out: Path) -> dict[str, Any]:
    """Write a stored source as GLiNER's evaluation folder `out` (replaced whole, atomically):
    a file per split it has, in store order, and `labels.json`, sorted. Negatives have no
    place in the layout and are counted."""

    store.require_source(source)
    out = Path(out)
    _replaceable(out, {*EVAL_FILES.values(), LABELS_FILE}, "export-gliner --benchmark")
    splits = sorted(store.splits_of(source), key=split_rank)
    written = {canonical_split(s): s for s in splits if canonical_split(s) in EVAL_FILES}
    rows: dict[str, int] = {}
    with atomic_dir(out) as tmp:
        for name, split in written.items():
            sentences = store.sentences_with_spans(source, split)
            recs = (
                eval_record(tokens, spans, f"{source}/{split}/{idx}")
                for _, idx, tokens, spans in sentences
            )
            with atomic_open(tmp / EVAL_FILES[name]) as fh:
                rows[name] = _write_list(fh, recs)
        labels = [lab for lab, _, _ in store.label_counts(source, by="label")]
        with atomic_open(tmp / LABELS_FILE) as fh:
            _write_list(fh, iter(labels))
    stats = next(s for s in store.stats()["sources"] if s["source"] == source)
    return {
        "source": source,
        "out": str(out),
        "rows": rows,
        "labels": len(labels),
        "splits_left_out": [s for s in splits if canonical_split(s) not in EVAL_FILES],
        "negatives_left_out": int(stats["negatives"]),
        "negative_spans_left_out": int(stats["negative_spans"]),
    }


def _replaceable(out: Path, names: set[str], by: str) -> None:
    """Refuse an `out` that holds other files than `names` (written `by`): it is replaced whole."""
    if out.exists():
        other = sorted(p.name for p in out.iterdir() if p.name not in names)
        if other or not out.is_dir():
            raise OutputFolderError(
                f"{out}: exists and holds other files ({', '.join(other[:5]) or 'not a folder'});"
                f" give a new folder or one written by {by}"
            )


# ------------------------------------------------------------------------- flair's columns
def export_flair(folder: Path, config: str | None, out: Path) -> dict[str, Any]:
    """Every split of one config of a built folder as flair's column files in `out` (replaced
    whole). flair 0.15.1's `ColumnCorpus` splits a line on whitespace and reads a line that
    starts "# " as a comment, hence the tab (`# O` would be one).

    A word holds one tag: mentions are taken by start, the longest first; one inside a mention
    written (`nested`) or crossing it (`overlapping`) is counted in `not_kept`. A label's
    whitespace is written `_` (`labels_renamed`).
    """
    where = config_folder(Path(folder), config)
    splits = {s: f for s in FLAIR_FILES if (f := sorted(where.glob(f"{s}-*.parquet")))}
    if not splits:
        raise InputError(f"{where}: no train, validation or test parquet files")
    _replaceable(out, set(FLAIR_FILES.values()), opt("format", "flair"))
    labels = sorted({lab for files in splits.values() for lab in parquet_labels(files)})
    tags = {lab: "_".join(lab.split()) for lab in labels}
    if len(set(tags.values())) < len(tags):
        twins = sorted(lab for lab in labels if list(tags.values()).count(tags[lab]) > 1)
        raise InputError(f"{folder}: labels {twins} would be written alike (whitespace as _)")
    rows: dict[str, int] = {}
    counts: Counter[str] = Counter()
    with atomic_dir(Path(out)) as tmp:
        for split, files in splits.items():
            with atomic_open(tmp / FLAIR_FILES[split]) as fh:
                rows[canonical_split(split)] = write_columns(parquet_rows(files), fh, tags, counts)
    return {
        "format": "flair",
        "out": str(out),
        "rows": rows,
        "mentions": counts["mentions"],
        "not_kept": {k: counts[k] for k in ("nested", "overlapping")},
        "negatives_left_out": counts["negatives"],
        "negative_spans_left_out": counts["negative_spans"],
        "labels_renamed": {lab: tag for lab, tag in tags.items() if lab != tag},
    }


def write_columns(rows: Iterator[Row], fh: TextIO, tags: dict[str, str], counts: Counter) -> int:
    """Write rows as column lines (see `export_flair`), adding to `counts`; returns the rows."""
    n = 0
    for row in rows:
        n += 1
        for t in row.tokens:
            if not t or t.startswith("-DOCSTART-") or any(c.isspace() for c in t):
                raise InputError(
                    f"{row.where}: token {t!r} is empty, holds whitespace or starts -DOCSTART-; "
                    "flair's column format cannot hold it"
                )
        bio, end = ["O"] * len(row.tokens), 0
        for a, b, label in sorted(row.spans, key=lambda s: (s[0], -s[1], s[2])):
            if a < end:  # inside the last mention written, or crossing it
                counts["nested" if b <= end else "overlapping"] += 1
                continue
            bio[a:b], end = [f"B-{tags[label]}"] + [f"I-{tags[label]}"] * (b - a - 1), b
            counts["mentions"] += 1
        counts["negatives"] += len(row.negatives or ())
        counts["negative_spans"] += len(row.negative_spans)
        fh.writelines(f"{t}\t{tag}\n" for t, tag in zip(row.tokens, bio, strict=True))
        fh.write("\n")
    return n
