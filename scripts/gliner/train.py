"""Train a span GLiNER on a GLiNER training json (`builders export-gliner`), offline.

    python scripts/gliner/train.py --train low.json --backbone MODEL_DIR --out runs/low-s1 --seed 1

Defaults are GLiNER's published hyper-parameters (the paper's config.yaml, GLiNER commit 7186c1b:
lr 1e-5 encoder / 5e-5 others, warm-up 10% then cosine, dropout 0.4, max_width 12, max_len 384,
max_types 25, types shuffled and randomly dropped, up to one in-batch negative type per mention,
BCE summed with positive spans weighted 2:1; gradients clipped at 10 as GLiNER's config does
now) with the protocol of the label-shift paper (10,000 steps, batch 8). `--backbone` is a
local Hugging Face encoder folder (config.json, tokenizer, weights); nothing is downloaded.

Checkpoints go to OUT/checkpoint-N (every --save-steps); run the same command again and it
resumes from the last one. The final model is written to OUT itself (GLiNER.from_pretrained(OUT)),
with OUT/train_settings.json: every setting, the versions, the data file's hash, the steps done.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", required=True, type=Path, help="GLiNER training json")
    p.add_argument("--backbone", required=True, type=Path, help="local HF encoder folder")
    p.add_argument("--out", required=True, type=Path, help="output folder (model, checkpoints)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr-encoder", type=float, default=1e-5)
    p.add_argument("--lr-others", type=float, default=5e-5)
    p.add_argument(
        "--weight-decay", type=float, default=0.01, help="both groups (torch AdamW's default)"
    )
    p.add_argument("--warmup-ratio", type=float, default=0.1)
    p.add_argument("--scheduler", default="cosine", help="transformers lr_scheduler_type")
    p.add_argument("--max-grad-norm", type=float, default=10.0)
    p.add_argument("--max-width", type=int, default=12, help="widest span, in words")
    p.add_argument("--max-len", type=int, default=384, help="words kept per row")
    p.add_argument("--max-types", type=int, default=25, help="entity types in a row's prompt")
    p.add_argument("--max-neg-type-ratio", type=int, default=1)
    p.add_argument(
        "--no-random-drop",
        dest="random_drop",
        action="store_false",
        help="keep every sampled type (GLiNER 0.2.29 always shuffles them)",
    )
    p.add_argument("--dropout", type=float, default=0.4)
    p.add_argument(
        "--focal-alpha",
        type=float,
        default=2 / 3,
        help="weight of positive spans in the BCE (negatives 1 - alpha); the paper's code "
        "weighted them 2:1, i.e. 2/3; GLiNER's config now 0.75; -1: unweighted",
    )
    p.add_argument("--focal-gamma", type=float, default=0.0)
    p.add_argument(
        "--hidden-size",
        type=int,
        default=None,
        help="span/label size; default the backbone's (the paper: deberta-v3's 768)",
    )
    p.add_argument(
        "--freeze",
        action="append",
        default=[],
        metavar="COMPONENT",
        help="GLiNER component to freeze (text_encoder); repeatable",
    )
    p.add_argument("--save-steps", type=int, default=1000)
    p.add_argument("--save-total-limit", type=int, default=2)
    p.add_argument("--logging-steps", type=int, default=10)
    p.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("OMP_NUM_THREADS", 0)) or None,
        help="torch CPU threads (default: $OMP_NUM_THREADS, else torch's)",
    )
    return p.parse_args(argv)


def add_random_drop(processor):
    """Keep a random non-empty prefix of each row's shuffled types, as the paper's code did.

    GLiNER 0.2.29 dropped this step; mentions of dropped types become negative spans.
    """
    generate = processor.batch_generate_class_mappings

    def with_drop(*args, **kwargs):
        class_to_ids, _id_to_classes = generate(*args, **kwargs)
        kept_c2i, kept_i2c = [], []
        for c2i in class_to_ids:
            types = [t for t, _ in sorted(c2i.items(), key=lambda kv: kv[1])]
            if len(types) > 1:
                types = types[: random.randint(1, len(types))]
            kept_c2i.append({t: i for i, t in enumerate(types, start=1)})
            kept_i2c.append({i: t for i, t in enumerate(types, start=1)})
        return kept_c2i, kept_i2c

    processor.batch_generate_class_mappings = with_drop


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import gliner
    import torch
    import transformers
    from gliner import GLiNER, GLiNERConfig
    from gliner.training import Trainer, TrainingArguments
    from transformers.trainer_utils import get_last_checkpoint

    if args.threads:
        torch.set_num_threads(args.threads)
    transformers.set_seed(args.seed)

    backbone = args.backbone.resolve()
    if not (backbone / "config.json").is_file():
        sys.exit(f"{backbone}: not a Hugging Face model folder (no config.json)")
    hidden_size = args.hidden_size or transformers.AutoConfig.from_pretrained(backbone).hidden_size
    rows = json.loads(args.train.read_text(encoding="utf-8"))

    model_config = dict(
        model_name=str(backbone),
        span_mode="markerV0",
        hidden_size=hidden_size,
        dropout=args.dropout,
        max_width=args.max_width,
        max_len=args.max_len,
        max_types=args.max_types,
        max_neg_type_ratio=args.max_neg_type_ratio,
        subtoken_pooling="first",
        fine_tune=True,
    )
    model = GLiNER.from_config(GLiNERConfig(**model_config), load_tokenizer=True)
    if args.random_drop:
        add_random_drop(model.data_processor)
    for component in args.freeze:
        model.freeze_component(component)

    training_args = TrainingArguments(
        output_dir=str(args.out),
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr_encoder,
        others_lr=args.lr_others,
        weight_decay=args.weight_decay,
        others_weight_decay=args.weight_decay,
        lr_scheduler_type=args.scheduler,
        warmup_ratio=args.warmup_ratio,
        max_grad_norm=args.max_grad_norm,
        focal_loss_alpha=args.focal_alpha,
        focal_loss_gamma=args.focal_gamma,
        loss_reduction="sum",
        negatives=1.0,
        masking="none",
        save_steps=args.save_steps,
        save_total_limit=args.save_total_limit,
        logging_steps=args.logging_steps,
        seed=args.seed,
        data_seed=args.seed,
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        remove_unused_columns=False,
        report_to="none",
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=rows,
        data_collator=model.data_collator_class(model.config, data_processor=model.data_processor),
        processing_class=model.data_processor.transformer_tokenizer,
    )
    last = get_last_checkpoint(str(args.out)) if args.out.is_dir() else None
    if last:
        print(f"resuming from {last}", file=sys.stderr)
    started = time.time()
    trainer.train(resume_from_checkpoint=last)
    model.save_pretrained(
        args.out, safe_serialization=True
    )  # weights, gliner_config.json, tokenizer

    settings = {
        "script": "scripts/gliner/train.py",
        "argv": sys.argv[1:] if argv is None else list(argv),
        "train": {
            "path": str(args.train.resolve()),
            "sha256": sha256(args.train),
            "rows": len(rows),
        },
        "backbone": str(backbone),
        "model_config": model_config,
        "training": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("train", "backbone", "out")
        },
        "loss": {
            "type": "focal bce",
            "alpha": args.focal_alpha,
            "gamma": args.focal_gamma,
            "reduction": "sum",
            "masking": "none",
            "negatives": 1.0,
        },
        "resumed_from": last,
        "global_step": trainer.state.global_step,
        "seconds_this_run": round(time.time() - started, 1),
        "log_history": trainer.state.log_history,
        "versions": {
            "gliner": gliner.__version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "python": sys.version.split()[0],
        },
    }
    (args.out / "train_settings.json").write_text(
        json.dumps(settings, indent=2) + "\n", encoding="utf-8"
    )
    print(f"model and train_settings.json in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
