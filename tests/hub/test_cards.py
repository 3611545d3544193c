"""Dataset cards: golden files, Hub-valid YAML, the histogram, and loading the built folders.

The golden inputs under `tests/data/golden/` are `build.json` files of a real MiniLM build of
the bundled Pile-NER sample, trimmed to what the card shows (no `per_label`). Regenerate the
inputs (from the build below) and the expected cards with `UPDATE_GOLDEN=1 pytest tests/test_cards.py`.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import warnings
from pathlib import Path
from typing import Any

import datasets
import pyarrow.parquet as pq
import pytest
import yaml
from helpers import DATA
from huggingface_hub import DatasetCard

from builders.hub import cards, changelog
from builders.hub import fewnerd_card as cards_fewnerd
from builders.hub import templating as card_common
from builders.hub.cards import render_card
from builders.hub.changelog import compare, subset_metrics, with_entry
from builders.hub.fewnerd_card import render_fewnerd_card
from builders.hub.folder import configs_of, subset_features
from builders.hub.plots import histogram_png, score_plot_title
from builders.hub.templating import license_id, size_category

GOLDEN = DATA / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
MINILM = "all-MiniLM-L6-v2"
CASES = {  # golden card -> (subset folder, configs, licence, origin, with changelog)
    "pilener-sample-low-shift.md": (
        "pilener-sample-low-shift",
        ("entropy", "max"),
        "cc-by-nc-4.0",
        None,
        True,
    ),
    "pilener-sample-medium-shift.md": (
        "pilener-sample-medium-shift",
        ("entropy",),
        "unknown",
        "Universal-NER/Pile-NER-type",
        False,
    ),
}


@pytest.fixture(scope="module")
def built(sample_build: Path) -> Path:
    """The bundled sample built with MiniLM, both strategies, all levels (once per session)."""
    return sample_build


def _trim(build: dict[str, Any]) -> dict[str, Any]:
    """A build.json without what the card does not show (per-label Familiarity)."""
    b = copy.deepcopy(build)
    for key in ("subset", "full"):
        if b.get(key):
            b[key]["familiarity"].pop("per_label", None)
    return b


def _fixture(folder: str, config: str) -> Path:
    return GOLDEN / folder / f"{config}.build.json"


def _builds(folder: str, configs: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    return {c: json.loads(_fixture(folder, c).read_text(encoding="utf-8")) for c in configs}


def _changelog(builds: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    old = copy.deepcopy(builds)
    old["entropy"]["subset"]["sentences"] -= 40
    old["entropy"]["subset"]["familiarity"]["union_macro"] += 0.0123
    del old["max"]
    log: list[dict[str, Any]] = [{"version": "v1", "note": "First release.", "changes": {}}]
    run = {"version": "v2 (toolkit 0.1.0)", "id": "run2"}
    for c, note in (("entropy", "Added the `max` config."), ("max", None)):
        changes = compare(subset_metrics(old.get(c)), subset_metrics(builds[c]))
        extra = {"labels_added": ["title"], "labels_removed": []} if c == "entropy" else None
        log = with_entry(log, run, c, changes, note or "", extra)
    return log


def _render(case: str) -> str:
    folder, configs, lic, origin, with_log = CASES[case]
    builds = _builds(folder, configs)
    return render_card(
        folder,
        builds,
        license=lic,
        source_origin=origin,
        changelog=_changelog(builds) if with_log else None,
    )


def _front_matter(text: str) -> dict[str, Any]:
    m = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    assert m, "card must start with YAML front matter"
    return yaml.safe_load(m.group(1))


def test_fixtures_have_the_shape_of_a_real_build(built: Path) -> None:
    def keys(obj: Any, depth: int = 0) -> Any:
        if isinstance(obj, dict) and depth < 3:
            return {k: keys(v, depth + 1) for k, v in obj.items()}
        return type(obj).__name__

    for folder, configs in {v[0]: v[1] for v in CASES.values()}.items():
        for config in configs:
            real = _trim(json.loads((built / folder / config / "build.json").read_text()))
            if UPDATE:
                _fixture(folder, config).parent.mkdir(parents=True, exist_ok=True)
                _fixture(folder, config).write_text(
                    json.dumps(real, indent=2, sort_keys=True) + "\n", encoding="utf-8"
                )
            fixture = json.loads(_fixture(folder, config).read_text(encoding="utf-8"))
            assert keys(fixture) == keys(real), f"refresh {_fixture(folder, config)}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_card_matches_golden(case: str) -> None:
    text = _render(case)
    if UPDATE:
        (GOLDEN / case).write_text(text, encoding="utf-8")
    assert text == (GOLDEN / case).read_text(encoding="utf-8")
    assert text == _render(case)  # pure: same input, same text


@pytest.mark.parametrize("case", sorted(CASES))
def test_card_yaml_is_valid_for_the_hub_and_datasets(case: str) -> None:
    folder, configs, _lic, origin, _ = CASES[case]
    text = _render(case)
    meta = _front_matter(text)
    recorded = _builds(folder, configs)[configs[0]]["provenance"]["source"]["license"]
    assert meta["license"] == license_id(recorded)  # the build's record wins over the argument
    assert meta["task_categories"] == ["token-classification"]
    assert meta["task_ids"] == ["named-entity-recognition"]
    assert meta["size_categories"] == ["1K<n<10K" if "low" in folder else "n<1K"]
    src = _builds(folder, configs)[configs[0]]["provenance"]["source"]
    # listed only when the rows were read from that Hub dataset (the sample was read from a file)
    assert meta.get("source_datasets") == ([origin] if src["read_from_hub"] else None)
    assert set(meta["tags"]) >= {"ner", "zero-shot", "label-shift", "familiarity", "synthetic"}
    assert [c["config_name"] for c in meta["configs"]] == list(configs)
    assert meta["configs"][0]["default"] is True
    builds = _builds(folder, configs)
    for c in configs:
        fam = meta["familiarity"][c]
        assert fam["union_macro"] == round(builds[c]["subset"]["familiarity"]["union_macro"], 4)
        assert fam["full_corpus_union_macro"] == round(
            builds[c]["full"]["familiarity"]["union_macro"], 4
        )
        assert set(fam["benchmarks"]) == set(builds[c]["subset"]["familiarity"]["per_benchmark"])
    card = DatasetCard(text)
    assert card.data.license == meta["license"]
    assert card.data.to_dict()["configs"] == meta["configs"]
    # What `load_dataset` reads from the card: configs and typed features per config.
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs

    assert list(MetadataConfigs.from_dataset_card_data(card.data)) == list(configs)
    infos = DatasetInfosDict.from_dataset_card_data(card.data)
    for c in configs:
        assert infos[c].features == subset_features()
        assert infos[c].splits["train"].num_examples == builds[c]["subset"]["sentences"]


def test_card_shows_the_builds_numbers() -> None:
    text = _render("pilener-sample-low-shift.md")
    builds = _builds("pilener-sample-low-shift", ("entropy", "max"))
    body = text.split("\n---\n", 1)[1]
    for c, b in builds.items():
        sub = b["subset"]
        assert f"| this subset, `{c}` | {sub['sentences']:,} | {sub['mentions']:,} |" in body
        assert f"**{sub['familiarity']['union_macro']:.4f}**" in body
        assert f"{b['full']['familiarity']['union_macro']:.4f}" in body
        for top in sub["familiarity"]["per_benchmark"]["mit-movie"]["top_training_labels"]:
            assert top["label"] in body
        assert f"![Histogram of the {c} scores" in body and f"]({c}/scores.png)" in body
    assert f"| full `pilener-sample` | {builds['entropy']['full']['sentences']:,} |" in body
    assert "build-splits --source pilener-sample --strategy max --model all-MiniLM-L6-v2" in body
    assert "golde2024familiarity" in body and "zhou2024universalner" in body
    assert (
        "## Changelog" in body and "| `entropy` | rows |" in body and "| `max` | rows | – |" in body
    )
    assert "fewer than K" not in body  # 7,297 mentions >= K


def test_n_below_k_note_and_no_changelog() -> None:
    builds = _builds("pilener-sample-medium-shift", ("entropy",))
    assert "fewer than K" not in render_card("x", builds, license="mit", source_origin=None)
    builds["entropy"]["subset"]["mentions"] = 285
    text = render_card("x", builds, license="mit", source_origin=None)
    assert "fewer than K = 1000" in text
    assert "## Changelog" not in text


def _with_checks(old_shape: bool) -> dict[str, dict[str, Any]]:
    """The medium golden build with two check models' figures (build.json since check models
    were repeatable), or one model's in the shape older build.json files have."""
    builds = _builds("pilener-sample-medium-shift", ("entropy",))
    b = builds["entropy"]
    reports, checks = [], []
    for name in ("model-a", "model-b")[: 1 if old_shape else 2]:
        rep = {**b["subset"]["familiarity"], "model": name}
        reports.append(rep)
        falls = copy.deepcopy(b["verdicts"]["falls"])
        checks.append({"model": name, "falls": falls, "holds": True, "gaps": {"low/medium": 0.1}})
    b["config"]["check_model"] = "model-a" if old_shape else ["model-a", "model-b"]
    b["subset"]["check_familiarity"] = reports[0] if old_shape else reports
    b["full"]["check_familiarity"] = reports[0] if old_shape else reports
    b["verdicts"]["check"] = checks[0] if old_shape else checks
    return builds


def test_every_check_models_figures_are_in_the_card_and_its_yaml() -> None:
    text = render_card("x", _with_checks(False), license="mit", source_origin=None)
    for name in ("model-a", "model-b"):
        assert f"under the **check model** `{name}`" in text
        assert f"Under the check model `{name}`:" in text
    assert text.count("The order over the union holds under both models: **yes**.") == 2
    metas = _front_matter(text)["familiarity"]["entropy"]["check_models"]
    assert [m["model"] for m in metas] == ["model-a", "model-b"]
    old = render_card("x", _with_checks(True), license="mit", source_origin=None)
    assert "under the **check model** `model-a`" in old and "model-b" not in old
    assert [m["model"] for m in _front_matter(old)["familiarity"]["entropy"]["check_models"]] == [
        "model-a"
    ]


def test_changelog_as_the_scenario_runner_writes_it() -> None:
    builds = _builds("pilener-sample-medium-shift", ("entropy",))
    log = [
        {
            "version": "0.1.0",
            "run": "r2",
            "note": "weekly: source changed",
            "changes": {
                "entropy": {
                    "rows": [10, 12],
                    "familiarity": [0.3, 0.2958],
                    "familiarity mit-movie": [None, 0.2915],
                    "labels": [4, 4],
                }
            },
            "details": {"entropy": {"labels_added": [f"l{i}" for i in range(25)]}},
        }
    ]
    text = render_card("x", builds, license="mit", source_origin=None, changelog=log)
    assert "| `entropy` | rows | 10 | 12 | +2 |" in text
    assert "| `entropy` | familiarity | 0.3000 | 0.2958 | -0.0042 |" in text
    assert "| `entropy` | familiarity mit-movie | – | 0.2915 | added |" in text
    assert "| `entropy` | labels |" not in text  # unchanged metrics are left out
    assert '- `entropy`: 25 labels added: "l0", "l1",' in text and '"l19" and 5 more' in text
    assert "r2" not in text


def test_card_never_carries_a_token() -> None:
    builds = _builds("pilener-sample-medium-shift", ("entropy",))
    builds["entropy"]["command"] = (
        "build-splits --source pilener-sample --token hf_AbCdEfGhIjKlMnOpQrStUv --seed 0"
    )
    log = [{"version": "v2", "note": "pushed with hf_ZyXwVuTsRqPoNmLkJi", "changes": {}}]
    text = render_card("x", builds, license="mit", source_origin=None, changelog=log)
    assert "hf_AbCd" not in text and "hf_ZyXw" not in text
    assert "--token *** --seed 0" in text


def test_recorded_command_wins_over_the_synthesised_one() -> None:
    builds = _builds("pilener-sample-medium-shift", ("entropy",))
    builds["entropy"]["command"] = "build-splits --source pilener-sample --out 'my out'"
    text = render_card("x", builds, license="mit", source_origin=None)
    assert "build-splits --source pilener-sample --out 'my out'\n" in text


def test_render_card_needs_a_build() -> None:
    with pytest.raises(ValueError, match="at least one"):
        render_card("x", {}, license="mit", source_origin=None)


@pytest.mark.parametrize(
    ("n", "cat"),
    [
        (0, "n<1K"),
        (999, "n<1K"),
        (1_000, "1K<n<10K"),
        (78_800, "10K<n<100K"),
        (618_000, "100K<n<1M"),
        (2_000_000, "1M<n<10M"),
    ],
)
def test_size_category(n: int, cat: str) -> None:
    assert size_category(n) == cat


def test_license_ids() -> None:
    assert license_id("cc-by-nc-4.0") == "cc-by-nc-4.0"
    assert license_id("MIT") == "mit"
    assert license_id("unknown") == "other"
    assert license_id(None) == "other"


# --- the histogram ------------------------------------------------------------------------


def test_histogram_bytes_are_deterministic() -> None:
    scores = [0.01 * i for i in range(300)]
    cuts = {"low": [0.5], "medium": [1.4, 1.6], "high": [2.8]}
    a = histogram_png(scores, cuts, "max similarity m", level="low")
    b = histogram_png(scores, cuts, "max similarity m", level="low")
    assert a == b
    assert a.startswith(b"\x89PNG\r\n\x1a\n")
    assert b"Software" not in a and b"matplotlib" not in a
    assert (
        histogram_png(scores, cuts, "max similarity m", level="high") != a
    )  # its own level is drawn solid


def test_written_histogram_is_reproducible_from_scores_and_cuts(built: Path) -> None:
    folder = built / "pilener-sample-high-shift" / "entropy"
    info = json.loads((folder / "build.json").read_text())
    scores = pq.read_table(folder / "scores.parquet").column("score").to_pylist()
    cuts = {lv: c["thresholds"] for lv, c in info["cuts"].items()}
    assert set(cuts) == {"low", "medium", "high"}
    cuts = {lv: cuts[lv] for lv in ("low", "medium", "high")}
    c = info["config"]
    title = score_plot_title(
        c["source"], "entropy", len(scores), list(info["subset"]["familiarity"]["per_benchmark"]),
        c["model"], "high",
    )  # fmt: skip
    sides = {lv: c["side"] for lv, c in info["cuts"].items()}
    png = histogram_png(scores, cuts, "entropy e", level="high", title=title, sides=sides)
    assert (folder / "scores.png").read_bytes() == png


# --- the built folders --------------------------------------------------------------------


def test_built_folder_card_links_exist_and_build_json_has_full_and_cuts(built: Path) -> None:
    for folder in sorted(p for p in built.iterdir() if p.is_dir()):
        text = (folder / "README.md").read_text(encoding="utf-8")
        links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
        assert links == ["entropy/scores.png", "max/scores.png"]
        assert all((folder / link).is_file() for link in links)
        assert "provisional" not in text.lower()
        for c in configs_of(folder):
            info = json.loads((folder / c / "build.json").read_text())
            assert info["full"]["level"] == "full" and info["full"]["sentences"] == 2217
            assert info["cuts"][info["subset"]["level"]] == {
                k: v for k, v in info["subset"]["selection"].items() if k != "profile"
            }


@pytest.mark.parametrize("config", [None, "entropy", "max"])
def test_load_dataset_on_a_built_folder(built: Path, config: str | None) -> None:
    for folder in sorted(p for p in built.iterdir() if p.is_dir()):
        ds = datasets.load_dataset(str(folder), config, split="train")
        info = json.loads((folder / (config or "entropy") / "build.json").read_text())
        assert ds.num_rows == info["subset"]["sentences"]
        assert ds.features == subset_features()
        assert ds.features["spans"] == datasets.List(
            {
                "start": datasets.Value("int32"),
                "end": datasets.Value("int32"),
                "label": datasets.Value("string"),
            }
        )
        row = ds[0]
        assert all(s["end"] <= len(row["tokens"]) for s in row["spans"])


# --- Few-NERD -----------------------------------------------------------------------------


def _fewnerd_summary() -> dict[str, Any]:
    return json.loads((GOLDEN / "fewnerd-inter.summary.json").read_text(encoding="utf-8"))


def _fewnerd_features() -> Any:
    fx = pytest.importorskip("builders.fewnerd.folder")
    from builders.fewnerd.splits import fine_types

    return fx.features(list(fine_types()))


def _fewnerd_card() -> str:
    return render_fewnerd_card(
        "org/fewnerd-inter",
        _fewnerd_summary(),
        command="builders fewnerd-splits --mode inter --assignment official --seed 0",
        features=_fewnerd_features(),
        version="0.1.0",
    )


def test_fewnerd_card_matches_golden() -> None:
    text = _fewnerd_card()
    if UPDATE:
        (GOLDEN / "fewnerd-inter.md").write_text(text, encoding="utf-8")
    assert text == (GOLDEN / "fewnerd-inter.md").read_text(encoding="utf-8")
    meta = _front_matter(text)
    assert meta["license"] == "cc-by-sa-4.0"
    assert meta["source_datasets"] == ["DFKI-SLT/few-nerd"]
    assert DatasetCard(text).data.license == "cc-by-sa-4.0"
    assert "ding2021fewnerd" in text and "golde2024familiarity" in text


@pytest.fixture(scope="module")
def fewnerd_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`fewnerd-intra` written by `write_split` from the Few-NERD excerpts in tests/data."""
    from builders.fewnerd.folder import write_split
    from builders.fewnerd.splits import build_split
    from builders.store import Store
    from builders.store.ingest import ingest

    root = tmp_path_factory.mktemp("fewnerd")
    with Store(root / "s.duckdb") as store:
        ingest(store, "fewnerd", DATA / "fewnerd")
        built = build_split(store, "fewnerd", "intra", seed=3)
    return write_split(built, root / "out", command="builders fewnerd-splits --mode intra")


def _load_without_warnings(
    folder: Path, config: str | None, caplog: pytest.LogCaptureFixture
) -> datasets.DatasetDict:
    """`load_dataset` on a folder; fails on any warning it issues or logs."""
    caplog.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = datasets.load_dataset(str(folder), config)
    logged = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not logged, [r.getMessage() for r in logged]
    return ds


def _assert_sizes_are_datasets_own(ds: datasets.DatasetDict, text: str, config: str) -> None:
    """The card's dataset_info for `config` holds what `datasets` computed when loading."""
    from datasets.info import DatasetInfosDict

    info = DatasetInfosDict.from_dataset_card_data(DatasetCard(text).data)[config]
    for split, d in ds.items():
        assert info.splits[split].num_bytes == d.info.splits[split].num_bytes > 0
        assert info.splits[split].num_examples == d.num_rows
    loaded = next(iter(ds.values())).info
    assert (info.download_size, info.dataset_size) == (loaded.download_size, loaded.dataset_size)
    assert info.features == next(iter(ds.values())).features


@pytest.mark.parametrize("config", ["entropy", "max"])
def test_every_subset_folder_loads_without_warnings_with_datasets_sizes(
    built: Path, config: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for folder in sorted(p for p in built.iterdir() if p.is_dir()):
        ds = _load_without_warnings(folder, config, caplog)
        text = (folder / "README.md").read_text(encoding="utf-8")
        _assert_sizes_are_datasets_own(ds, text, config)
        build = json.loads((folder / config / "build.json").read_text())
        assert build["num_bytes"] == ds["train"].info.splits["train"].num_bytes


def test_fewnerd_folder_loads_without_warnings_with_datasets_sizes(
    fewnerd_folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    ds = _load_without_warnings(fewnerd_folder, None, caplog)
    assert list(ds) == ["train", "validation", "test"]
    text = (fewnerd_folder / "README.md").read_text(encoding="utf-8")
    _assert_sizes_are_datasets_own(ds, text, "default")
    assert isinstance(ds["test"].features["fine_ner_tags"].feature, datasets.ClassLabel)
    summary = json.loads((fewnerd_folder / "summary.json").read_text())
    assert {p: v["num_bytes"] for p, v in summary["parts"].items()} == {
        s: d.info.splits[s].num_bytes for s, d in ds.items()
    }


def test_a_folders_card_renders_again_from_its_files(built: Path, fewnerd_folder: Path) -> None:
    """What `publish` does: the card from the folder's own files, for a repo id."""
    from builders.hub.readme import folder_card

    for folder in [*sorted(p for p in built.iterdir() if p.is_dir()), fewnerd_folder]:
        text = (folder / "README.md").read_text(encoding="utf-8")
        assert folder_card(folder, folder.name) == text
        for_org = folder_card(folder, f"testorg/{folder.name}")
        lines = for_org.replace(f"testorg/{folder.name}", folder.name).splitlines(keepends=True)
        # only the dataset's BibTeX gains its author and Hub address, and the local folder's
        # load line its note (where to run it from)
        local = text.replace("; a local folder: run from where it was written", "")
        local = "".join(line for line in local.splitlines(True) if "# a local folder:" not in line)
        hub_only = ("howpublished", "author       = {{testorg}}", "url          = {https://hug")
        assert "".join(ln for ln in lines if not any(h in ln for h in hub_only)) == local
        assert f'load_dataset("testorg/{folder.name}"' in for_org
        dated = folder_card(folder, f"testorg/{folder.name}", year=2031)
        if "@misc{" in text and "summary.json" not in {p.name for p in folder.iterdir()}:
            entry = dated[dated.index("```bibtex") : dated.index("}\n", dated.index("@misc{"))]
            assert "  year         = {2031}," in entry  # the year publish passes
            assert "author       = {{testorg}}" in entry and "url          = {https://" in entry
        assert dated.replace("  year         = {2031},\n", "") == for_org


@pytest.mark.parametrize("module", [cards, card_common, cards_fewnerd, changelog])
def test_module_has_no_clock_or_io_in_rendering(module: Any) -> None:
    src = Path(module.__file__).read_text(encoding="utf-8")
    assert "datetime" not in src and "time.time" not in src and "os.environ" not in src
