"""Predict the seven zero-shot benchmarks' test sets with a trained GLiNER folder, offline.

    python scripts/gliner/predict.py MODEL_DIR --out PRED_DIR [--limit 300]

Each benchmark is read as GLiNER's own evaluation reads it (gliner.evaluation.evaluate_ner:
`process` splits the sentence on whitespace, types lower-cased; the labels are its
labels.json, lower-cased) and predicted with flat_ner=True, threshold 0.5, batched, in file
order. Writes PRED_DIR/<benchmark>.json, a list of {"tokenized_text": [...], "ner":
[[start, end_inclusive, label], ...]} (word indices, GLiNER's layout), one per sentence;
PRED_DIR/gliner_scores.json, benchmark -> {precision, recall, f1} as GLiNER's
`model.evaluate(test, flat_ner=True, threshold=0.5, batch_size, entity_types=labels)`
computes them on the same sentences; and PRED_DIR/manifest.json (model, weights hash, settings).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

BENCHMARKS = {  # output name -> folder under --data
    "crossner-ai": "CrossNER_AI",
    "crossner-literature": "CrossNER_literature",
    "crossner-music": "CrossNER_music",
    "crossner-politics": "CrossNER_politics",
    "crossner-science": "CrossNER_science",
    "mit-movie": "mit-movie",
    "mit-restaurant": "mit-restaurant",
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path, help="a GLiNER model folder (gliner_config.json)")
    p.add_argument("--out", required=True, type=Path, help="folder for the predictions")
    p.add_argument("--data", type=Path, default=Path("/work/shared/data/gliner-format"),
                   help="folder of GLiNER evaluation folders (test.json, labels.json)")
    p.add_argument("--benchmarks", default=",".join(BENCHMARKS), help="comma-separated names")
    p.add_argument("--limit", type=int, default=None, help="first N test sentences per benchmark")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", 0)) or None)
    return p.parse_args(argv)


def load_benchmark(folder: Path, limit: int | None):
    from gliner.evaluation.evaluate_ner import process

    test = json.loads((folder / "test.json").read_text(encoding="utf-8"))
    labels = [label.lower() for label in json.loads((folder / "labels.json").read_text(encoding="utf-8"))]
    return [process(row) for row in test[:limit]], labels


def predict(model, rows, labels, batch_size, threshold):
    """Word-level flat predictions, by the steps `model.evaluate` takes (collate, run, decode)."""
    collator = model.create_collator()
    out = []
    for i in range(0, len(rows), batch_size):
        chunk = [{"tokenized_text": r["tokenized_text"], "ner": None} for r in rows[i : i + batch_size]]
        batch = model.collate_batch(chunk, labels, collator)
        output = model.run_batch(batch, threshold=threshold)
        decoded = model.decode_batch(output, batch, threshold=threshold, flat_ner=True, multi_label=False)
        for row, spans in zip(chunk, decoded, strict=True):
            out.append({"tokenized_text": row["tokenized_text"],
                        "ner": [[s.start, s.end, s.entity_type] for s in spans]})
    return out


def weights_hash(model_dir: Path) -> str | None:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (model_dir / name).is_file():
            h = hashlib.sha256()
            with open(model_dir / name, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            return f"{name}:sha256:{h.hexdigest()}"
    return None


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import torch
    import gliner
    from gliner import GLiNER
    from gliner.evaluation.evaluator import BaseNEREvaluator

    if args.threads:
        torch.set_num_threads(args.threads)
    model = GLiNER.from_pretrained(str(args.model), local_files_only=True)
    model.eval()
    args.out.mkdir(parents=True, exist_ok=True)

    scores, counts = {}, {}
    for name in [b.strip() for b in args.benchmarks.split(",") if b.strip()]:
        started = time.time()
        rows, labels = load_benchmark(args.data / BENCHMARKS[name], args.limit)
        preds = predict(model, rows, labels, args.batch_size, args.threshold)
        (args.out / f"{name}.json").write_text(json.dumps(preds, ensure_ascii=False) + "\n", encoding="utf-8")

        # GLiNER's own figure on the same sentences: its f1 is returned as a float, its P and R
        # only in a string ("P: 12.34%\tR: ..."), so they are also recomputed by its evaluator
        # from the predictions written above, whose f1 must equal evaluate's.
        report, f1 = model.evaluate(rows, flat_ner=True, threshold=args.threshold,
                                    batch_size=args.batch_size, entity_types=labels)
        mine = BaseNEREvaluator([r["ner"] for r in rows], [p["ner"] for p in preds])
        prf = mine.compute_prf(*mine.transform_data())
        p, r = (float(x) / 100 for x in re.findall(r"([\d.]+)%", report)[:2])
        if abs(float(prf["f_score"]) - float(f1)) > 1e-9:
            print(f"warning: {name}: predictions written score f1 {prf['f_score']:.6f}, "
                  f"GLiNER's evaluate {f1:.6f}", file=sys.stderr)
        scores[name] = {"precision": float(prf["precision"]), "recall": float(prf["recall"]), "f1": float(f1),
                        "evaluate_report": report.strip(), "evaluate_precision_2dp": p, "evaluate_recall_2dp": r}
        counts[name] = {"sentences": len(rows), "labels": labels,
                        "gold_mentions": sum(len(x["ner"]) for x in rows),
                        "predicted_mentions": sum(len(x["ner"]) for x in preds),
                        "seconds": round(time.time() - started, 1)}
        print(f"{name:20s} n={len(rows):5d}  {report.strip()}  ({counts[name]['seconds']}s)", flush=True)

    (args.out / "gliner_scores.json").write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")
    manifest = {
        "model": str(args.model.resolve()), "weights": weights_hash(args.model),
        "threshold": args.threshold, "flat_ner": True, "batch_size": args.batch_size, "limit": args.limit,
        "data": str(args.data.resolve()), "benchmarks": counts,
        "versions": {"gliner": gliner.__version__, "torch": torch.__version__},
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    mean = sum(s["f1"] for s in scores.values()) / max(len(scores), 1)
    print(f"mean f1 over {len(scores)} benchmarks: {mean:.4f}; files in {args.out}")


if __name__ == "__main__":
    main()
