"""The shared settings: each spec checks itself once, every request holds it whole, and its
flat spelling (build.json, a recorded command, scenarios.toml) goes both ways unchanged."""

from __future__ import annotations

from dataclasses import fields

import click
import pytest
from click.testing import CliRunner

from builders.cli.options import embedding_options, metric_options, model_option
from builders.errors import BuildersError
from builders.fewnerd.splits import FewnerdRequest
from builders.scenarios.book import FEWNERD_KEYS
from builders.shift.embedder import Embedder
from builders.shift.specs import EmbeddingSpec, MetricSpec, flat, spec_fields, split_flat
from builders.splits import SplitConfig
from builders.splits.config import FLAT_ORDER
from builders.splits.strategies.quantile import QuantileOptions


def test_an_embedding_spec_refuses_what_no_runtime_runs() -> None:
    with pytest.raises(BuildersError, match=r"unknown --backend 'tensorrt'. Valid: auto, torch"):
        EmbeddingSpec(backend="tensorrt")
    with pytest.raises(BuildersError, match=r"unknown --precision 'int4'"):
        EmbeddingSpec(precision="int4")
    with pytest.raises(BuildersError, match="--backend onnx runs --precision fp32, not fp16"):
        EmbeddingSpec(backend="onnx", precision="fp16")
    assert EmbeddingSpec("m", "openvino", "bf16").with_model("n") == EmbeddingSpec(
        "n", "openvino", "bf16"
    )


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"weighting": "harmonic"}, "unknown weighting 'harmonic'. Valid: zipf"),
        ({"protocol": "theirs"}, "unknown protocol 'theirs'. Valid: ours, paper"),
        ({"k": 0}, "--k must be >= 1, got 0"),
        ({"temperature": 0}, "temperature must be > 0, got 0"),
    ],
)
def test_a_metric_spec_refuses_what_it_cannot_read(given: dict, message: str) -> None:
    with pytest.raises(BuildersError, match=message):
        MetricSpec(**given)


def test_a_config_refuses_a_bad_spec_field_given_flat() -> None:
    """The flat spelling (a scenario, build.json) is checked by the spec it goes into."""
    with pytest.raises(BuildersError, match="--backend onnx runs --precision fp32"):
        SplitConfig.from_dict({"source": "x", "backend": "onnx", "precision": "bf16"})
    with pytest.raises(BuildersError, match="embedding= and model= both given"):
        SplitConfig.from_dict({"source": "x", "embedding": EmbeddingSpec(), "model": "m"})


def test_the_flat_spelling_goes_both_ways_in_its_order() -> None:
    cfg = SplitConfig(
        "x",
        "max",
        embedding=EmbeddingSpec("all-MiniLM-L6-v2", "torch", "bf16"),
        metric=MetricSpec(k=10, weighting="linear", temperature=0.5, seed=3, protocol="paper"),
        options=QuantileOptions(low_quantile=0.9),
    )
    flat_cfg = cfg.to_dict()
    assert tuple(flat_cfg) == FLAT_ORDER  # build.json's and --json's key order
    assert (flat_cfg["model"], flat_cfg["precision"], flat_cfg["k"]) == ("all-MiniLM-L6-v2",
                                                                         "bf16", 10)  # fmt: skip
    assert SplitConfig.from_dict(flat_cfg) == cfg
    assert tuple(SplitConfig.defaults()) == FLAT_ORDER[1:]
    assert "--backend torch --precision bf16" in cfg.command_line()


def test_flat_puts_a_new_spec_field_after_the_known_order() -> None:
    """A field a spec gains is spelt after the keys outputs have always had: they keep their
    bytes up to it."""
    got = flat({"a": 1, "embedding": EmbeddingSpec(), "b": 2}, ("b", "backend", "a"))
    assert list(got) == ["b", "backend", "a", "model", "precision"]
    back = split_flat(got, ("embedding",))
    assert back == {"a": 1, "b": 2, "embedding": EmbeddingSpec()}


def test_an_embedder_is_made_of_every_field_of_its_spec() -> None:
    spec = EmbeddingSpec("all-MiniLM-L6-v2", "torch", "fp16")
    emb = Embedder.of(spec, device="cpu")
    assert emb.spec == spec and emb.device == "cpu"
    assert Embedder.of(emb) is emb  # a caller's own: shared, not made again


def test_every_spec_field_has_its_option() -> None:
    """A spec's options make the spec: one option per field, by the field's name, declared
    in one place or several, and the command gets the spec, not its fields."""

    @click.command()
    @model_option
    @metric_options("protocol", "k")
    @click.option("--other", default="o")
    @metric_options("weighting", "temperature", "seed")
    @embedding_options
    def cmd(embedding: EmbeddingSpec, metric: MetricSpec, other: str) -> None:
        click.echo(f"{embedding!r} {metric!r}")

    names = [p.name for p in cmd.params]
    assert set(names) == {*spec_fields(EmbeddingSpec), *spec_fields(MetricSpec), "other"}
    assert names[:4] == ["model", "protocol", "k", "other"]  # where each is declared
    args = ["--model", "m", "--backend", "torch", "--precision", "bf16", "-k", "5", "--seed", "2"]
    res = CliRunner().invoke(cmd, args)
    assert res.exit_code == 0, res.output
    want = EmbeddingSpec("m", "torch", "bf16"), MetricSpec(k=5, seed=2)
    assert res.output.strip() == f"{want[0]!r} {want[1]!r}"
    res = CliRunner().invoke(cmd, ["--backend", "onnx", "--precision", "fp16"])
    assert res.exit_code == 1
    assert "Error: --backend onnx runs --precision fp32, not fp16" in res.output


def test_a_command_takes_only_the_metric_options_it_reads() -> None:
    """fewnerd-splits reads K alone; its own `--seed` (the split's) stays its own."""

    @click.command()
    @click.option("--seed", type=int, default=0)
    @metric_options("k")
    def cmd(seed: int, metric: MetricSpec) -> None:
        click.echo(f"{seed} {metric!r}")

    assert [p.name for p in cmd.params] == ["seed", "k"]
    res = CliRunner().invoke(cmd, ["-k", "7", "--seed", "3"])
    assert res.output.strip() == f"3 {MetricSpec(k=7)!r}", res.output


def test_a_fewnerd_request_reads_its_scenario_keys() -> None:
    params = {**FEWNERD_KEYS, "mode": "inter", "k": 50, "backend": "torch", "seed": 4}
    req = FewnerdRequest.from_dict("fn", params)
    assert req == FewnerdRequest(
        "inter",
        "official",
        4,
        "fn",
        embedding=EmbeddingSpec(backend="torch"),
        metric=MetricSpec(k=50),
    )
    assert req.metric.seed == MetricSpec().seed  # the split's seed is not the bootstrap's
    assert req.command_line() == (
        "builders fewnerd-splits --mode inter --assignment official --seed 4 --source fn"
    )
    assert {f.name for f in fields(EmbeddingSpec)} <= set(FEWNERD_KEYS)
