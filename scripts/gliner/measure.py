"""Measure the difficulty of a build's levels: export, train GLiNER with seeds, predict the
benchmarks, score, and write each level's measured F1 into its card and build.json.

    .venv-gliner/bin/python scripts/gliner/measure.py out/demo --config familiarity \\
        --backbone all-MiniLM-L6-v2 --seeds 1,2,3 --steps 10000 --work runs/demo [--db STORE]

For every level folder of the build in OUT (`*-{low,medium,high}-shift` holding CONFIG; a
`random` control level beside them too, where the build has one), in WORK:
`export-gliner` -> `LEVEL/train.json` (windows of no entity left out unless --keep-empty,
counted); per seed, `scripts/gliner/train.py` ->
`LEVEL/s<SEED>/model` (resumed where a run stopped; a finished model is kept); `builders
predict` -> `LEVEL/s<SEED>/predictions` (kept once written); then `WORK/runs.toml` and
`builders evaluate --runs WORK/runs.toml --record`, which prints Table 3 and Table 5 and writes
the measured difficulty into each level's card and build.json. Options after `--` go to
train.py (`-- --lr-encoder 5e-5 --max-width 8`). Run it in .venv-gliner (`make gliner`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEVELS = ("low", "medium", "high", "random")


def run(*argv: str) -> None:
    print("+", " ".join(argv), file=sys.stderr, flush=True)
    if subprocess.run(argv).returncode:
        sys.exit(f"measure: stopped where `{Path(argv[0]).name} {argv[1]}` failed (above); run "
                 "the same command again to go on from there")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out", type=Path, help="the build's output folder (build-splits --out)")
    ap.add_argument("--config", default="familiarity", help="the levels' config (strategy)")
    ap.add_argument(
        "--backbone", default="all-MiniLM-L6-v2", help="a local encoder folder or a packaged model"
    )
    ap.add_argument("--seeds", default="1", help="comma-separated training seeds")
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument(
        "--work", type=Path, required=True, help="folder for exports, models, predictions"
    )
    ap.add_argument("--db", help="the store holding the benchmarks' test sets ($LABELSHIFT_DB)")
    ap.add_argument(
        "--limit", type=int, help="predict only the first N test sentences of each benchmark"
    )
    ap.add_argument("--misc", default="keep", choices=("keep", "drop"))
    ap.add_argument("--max-words", type=int, help="export-gliner --max-words (windows' width)")
    ap.add_argument("--keep-empty", action="store_true", help="train on windows with no entity too")
    ap.add_argument(
        "--model", default="all-mpnet-base-v2", help="the embedding model of Familiarity"
    )
    args, train_options = ap.parse_known_args(argv)
    train_options = [o for o in train_options if o != "--"]
    bin_dir = Path(sys.executable).parent
    builders = str(bin_dir / "builders")
    db = ["--db", args.db] if args.db else []
    seeds = [int(s) for s in args.seeds.split(",")]
    backbone = args.backbone
    if not Path(backbone).is_dir():  # a packaged model, as --model names it
        from builders.shift.models import resolve_model

        backbone = resolve_model(backbone).path_or_name
    levels = sorted(
        (f for f in args.out.iterdir() if (f / args.config / "build.json").is_file()
         and any(f.name.endswith(f"-{lv}-shift") for lv in LEVELS)),
        key=lambda f: next(i for i, lv in enumerate(LEVELS) if f.name.endswith(f"-{lv}-shift")),
    )  # fmt: skip
    if not levels:
        sys.exit(f"{args.out}: no level folder with a {args.config}/build.json")
    runs = []
    for folder in levels:
        work = args.work / folder.name
        work.mkdir(parents=True, exist_ok=True)
        train = work / "train.json"
        if not train.is_file():
            width = ["--max-words", str(args.max_words)] if args.max_words else []
            run(builders, "export-gliner", str(folder), "--config", args.config, *width, "--out",
                str(train), "-q")  # fmt: skip
            if not args.keep_empty:
                rows = json.loads(train.read_text(encoding="utf-8"))
                kept = [r for r in rows if r["ner"]]
                print(f"{folder.name}: {len(rows) - len(kept)} of {len(rows)} windows hold no "
                      "entity, left out (--keep-empty keeps them)", file=sys.stderr)  # fmt: skip
                tmp = train.with_suffix(".tmp")
                tmp.write_text(json.dumps(kept), encoding="utf-8")
                tmp.replace(train)
        preds = []
        for seed in seeds:
            model, pred = work / f"s{seed}" / "model", work / f"s{seed}" / "predictions"
            if not (model / "gliner_config.json").is_file():
                run(sys.executable, str(HERE / "train.py"), "--train", str(train), "--backbone",
                    str(backbone), "--out", str(model), "--seed", str(seed), "--steps", str(args.steps), *train_options)  # fmt: skip
            if not (pred / "manifest.json").is_file():
                limit = ["--limit", str(args.limit)] if args.limit else []
                run(builders, "predict", str(model), "--out", str(pred), *limit, *db, "-q")
            preds.append(str(pred.resolve()))
        settings = json.loads((model / "train_settings.json").read_text(encoding="utf-8"))
        runs.append({"name": folder.name, "training": str(folder.resolve()), "predictions": preds,
                     "seeds": seeds, "model": f"GLiNER {settings['versions']['gliner']} on {Path(args.backbone).name}",
                     "steps": settings["global_step"], "config": args.config})  # fmt: skip
    toml = "\n".join(
        "[[run]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in r.items()) for r in runs
    )
    (args.work / "runs.toml").write_text(toml, encoding="utf-8")
    run(builders, "evaluate", "--runs", str(args.work / "runs.toml"), "--record", "--misc", args.misc,
        "--model", args.model, "--markdown", str(args.work / "results.md"), *db)  # fmt: skip


if __name__ == "__main__":
    main()
