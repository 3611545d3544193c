"""The table of known sources: one `SourceSpec` per corpus and benchmark (`SOURCES`), and the
facts about them other stages look up here (the paper's quantile profile of a named corpus;
the citations of a build recorded before its provenance was)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from builders.sources.planning import frozen
from builders.sources.spec import SourceSpec


def _crossner(domain: str, description: str, license: str = "mit") -> SourceSpec:
    return SourceSpec(
        name=f"crossner-{domain}",
        kind="benchmark",
        module="columns",
        description=description,
        options=frozen({"columns": "token,tag", "scheme": "bio"}),
        origin="DFKI-SLT/cross_ner",
        origin_config=domain,
        local=f"crossner/{domain}",
        splits=frozen({"train": ("train.txt",), "dev": ("dev.txt",), "test": ("test.txt",)}),
        license=license,
        annotation="human",
        credits=("crossner",),
    )


def _mit(name: str, description: str, origin: str | None = None) -> SourceSpec:
    """An MIT SLS corpus: BIO-tag<TAB>token files, label first."""
    return SourceSpec(
        name=name,
        kind="benchmark",
        module="columns",
        description=description,
        options=frozen({"scheme": "bio"}),
        origin=origin,
        local=name,
        splits=frozen({"train": ("*train*.bio",), "test": ("*test*.bio",)}),
        annotation="human",
    )


_SPECS: list[SourceSpec] = [
    *(
        _crossner(d, f"CrossNER {t}: token<TAB>BIO-tag column files")
        for d, t in [
            ("ai", "AI"),
            ("literature", "Literature"),
            ("music", "Music"),
            ("politics", "Politics"),
            ("science", "Science"),
        ]
    ),
    _crossner(
        "conll2003",
        "CrossNER's copy of CoNLL-2003 (tags renamed): token<TAB>BIO-tag",
        license="other",
    ),
    # No Hub copy of the `eng` corpus is registered: tner/mit_movie_trivia is trivia10k13.
    _mit(
        "mit-movie",
        "MIT Movie 'eng' corpus (MIT SLS: engtrain.bio, engtest.bio): "
        "BIO-tag<TAB>token, label first (token first is read too)",
    ),
    _mit(
        "mit-movie-trivia",
        "MIT Movie 'trivia10k13' corpus (MIT SLS: trivia10k13train.bio, "
        "trivia10k13test.bio): BIO-tag<TAB>token, label first",
    ),
    _mit(
        "mit-restaurant",
        "MIT Restaurant: BIO-tag<TAB>token, label first (token first is read too)",
        origin="tner/mit_restaurant",
    ),
    SourceSpec(
        name="conll2003",
        kind="benchmark",
        module="columns",
        description="CoNLL-2003: token POS chunk BIO-tag, space separated, -DOCSTART- lines",
        options=frozen({"columns": "token,pos,chunk,tag", "scheme": "bio"}),
        origin="eriktks/conll2003",
        local="conll2003",
        splits=frozen(
            {"train": ("train.txt",), "dev": ("valid.txt", "dev.txt"), "test": ("test.txt",)}
        ),
        license="other",
        annotation="human",
    ),
    SourceSpec(
        name="fewnerd",
        kind="benchmark",
        module="fewnerd",
        description="Few-NERD: token<TAB>IO coarse-fine tags, or BIO coarse_fine tags",
        origin="DFKI-SLT/few-nerd",
        origin_config="supervised",
        local="fewnerd/inter",
        splits=frozen(
            {"train": ("train*.txt",), "dev": ("dev*.txt", "valid*.txt"), "test": ("test*.txt",)}
        ),
        label_fn="fewnerd:map_label",
        # DFKI-SLT/few-nerd: `fine_ner_tags` holds the 66 fine types (IO, `person-artist/author`)
        hub_options=frozen({"tags_column": "fine_ner_tags", "scheme": "io"}),
        license="cc-by-sa-4.0",
        annotation="human",
        credits=("fewnerd",),
    ),
    SourceSpec(
        name="pilener",
        kind="corpus",
        module="pilener",
        description="Pile-NER conversation JSON (train.json or one-question evaluation files); "
        "also its BIO conversion (.bio)",
        origin="Universal-NER/Pile-NER-type",
        local="pilener/pilener-391xALL-dev.bio",
        # SLIMER's held-out slice is training material despite the `dev` in its name
        splits=frozen({"train": ("pilener-391xALL-dev.bio*",)}),
        local_note="SLIMER's held-out slice of Pile-NER (2,217 passages), not the whole "
        "corpus (Universal-NER/Pile-NER-type train.json, about 45,900 passages), which the "
        "authors' published figures are of; give train.json's path to read the corpus",
        labels="natural",
        license="cc-by-nc-4.0",
        annotation="llm",
        credits=("universalner",),
        loader_version="2",  # 2: tags among its types verbalised (`org` -> organization)
        profile="pilener",
    ),
    SourceSpec(
        name="pilener-sample",
        kind="corpus",
        module="columns",
        description="Bundled real sample: 2,217 Pile-NER passages in BIO (SLIMER's held-out slice)",
        # SLIMER's conversion flattened overlapping mentions, leaving 156 `I-x` tags right after
        # a `y` entity; they are read as `B-x` and counted as `repaired_tags`.
        options=frozen({"columns": "token,tag", "scheme": "bio", "sep": "\t", "repair": True}),
        origin="Universal-NER/Pile-NER-type",
        local="package:sample/pilener-391xALL-dev.bio.xz",
        splits=frozen({"train": ("pilener-391xALL-dev.bio*",)}),
        # natural-language types; none of the sample's 368 is a tag of the table, so its
        # labels are read as they are (version 1 reads it the same)
        labels="natural",
        license="cc-by-nc-4.0",
        annotation="llm",
        credits=("universalner", "slimer"),
        profile="pilener",
    ),
    SourceSpec(
        name="nuner",
        kind="corpus",
        module="nuner",
        description="NuNER CSV: input text, output list literal of '<mention> <> <type>'",
        origin="numind/NuNER",
        labels="natural",
        license="mit",
        annotation="llm",
        credits=("nuner",),
        loader_version="2",  # 2: tags among its types verbalised
        profile="nuner",
    ),
    SourceSpec(
        name="gliner",
        kind="corpus",
        module="gliner",
        description="GLiNER json: training (tokenized_text, ner) or benchmark (sentence, entities)",
        labels="natural",
        # 2: benchmark sentences split on whitespace, as GLiNER's eval; 3: tags among its types
        # verbalised (`PER` -> person)
        loader_version="3",
    ),
    SourceSpec(
        name="columns",
        kind="corpus",
        module="columns",
        description="Any column file: BIO/IO/BIOES, token-first or label-first (found from the "
        "values, or --columns), tab or space",
        loader_version="2",  # 2: tags verbalised by the packaged table (`PER` -> person)
    ),
    SourceSpec(
        name="brat",
        kind="corpus",
        module="brat",
        description="brat standoff (brat, INCEpTION): NAME.txt documents with their NAME.ann",
    ),
    SourceSpec(
        name="hf",
        kind="corpus",
        module="hf",
        description="Any Hugging Face dataset with a tokens column and tag sequences",
        loader_version="2",  # 2: tags verbalised by the packaged table (`PER` -> person)
    ),
]

SOURCES: Mapping[str, SourceSpec] = MappingProxyType({s.name: s for s in _SPECS})


#: A source's citation keys by the start of its name, for a build recorded before builds
#: recorded their source's provenance (with it, the source's own `credits` are cited).
NAME_CREDITS: Mapping[str, str] = MappingProxyType(
    {"pilener": "universalner", "nuner": "nuner", "fewnerd": "fewnerd"}
)


def source_profiles() -> dict[str, str]:
    """Source name -> the paper's quantile profile its builds use, for the sources that name
    one (Pile-NER and its sample: `pilener`; NuNER: `nuner`)."""
    return {s.name: s.profile for s in SOURCES.values() if s.profile is not None}
