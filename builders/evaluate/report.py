"""An evaluation as a reader sees it: tables (printed, or Markdown), the paper's views in
words, and a picture. F1 is shown in percent as papers do, Familiarity in 0-1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from builders.deferred import np
from builders.errors import opt
from builders.hub.plots import figure
from builders.hub.templating import cell

if TYPE_CHECKING:
    from builders.evaluate.evaluation import Evaluation
    from builders.evaluate.runs import RunsResult

#: A table: title, columns, rows of text, and which columns hold text (left-aligned).
Table = tuple[str, list[str], list[list[str]], set[int]]


def misc_text(misc: str) -> str:
    """How `else` was scored, and the setting that scores it the other way."""
    if misc == "keep":
        return f"`else` scored as a label (GLiNER's evaluation; {opt('misc', 'drop')} drops it, as UniversalNER's)"
    return "`else` dropped from gold and predictions (UniversalNER's evaluation; GLiNER's keeps it)"


def pct(f1: float | None) -> str:
    return "–" if f1 is None else f"{100 * f1:.1f}"


def num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _counted(s: Any) -> str:
    """What a file held beyond its score: unmatched sentences, reader counts, outside labels."""
    counts = [
        f"{k.replace('_', ' ')} {v:,}" for k, v in {"unmatched": s.unmatched, **s.read}.items() if v
    ]
    outside = [f"{z} ({n:,})" if n else z for z, n in s.outside.items()]
    return "; ".join([*counts, *([f"labels it lacks: {', '.join(outside)}"] if outside else [])])


def tables(ev: Evaluation) -> list[Table]:
    """Per benchmark (sentences scored, P, R, F1, Familiarity, what was counted), then per
    label with its context when training data was given."""
    fam = ev.context is not None
    rows = []
    for s in ev.scores:
        d = s.to_dict()
        rows.append([s.name, "–" if s.scored is None else f"{s.scored:,}/{s.sentences:,}",
                     pct(d["precision"]), pct(d["recall"]), pct(d["f1"]),
                     *([num(ev.familiarity(s.name))] if fam else []), _counted(s)])  # fmt: skip
    rows.append(
        ["macro", "", "", "", pct(ev.macro_f1), *([num(ev.familiarity())] if fam else []), ""]
    )
    cols = ["benchmark", "sentences", "P", "R", "F1", *(["Familiarity"] if fam else []), "counted"]
    out: list[Table] = [
        ("F1 (%) per benchmark (micro; macro over benchmarks)", cols, rows, {0, len(cols) - 1})
    ]
    if not fam:
        return out
    labels = [
        [p["benchmark"], p["label"], "–" if p["support"] is None else f"{p['support']:,}",
         pct(p["f1"]), num(p["familiarity"]), "yes" if p["seen"] else "no", f"{p['mentions']:,}",
         ", ".join(f"{c['label']} {c['similarity']:.2f}" for c in p["closest"])]
        for p in ev.points
    ]  # fmt: skip
    cols = [
        "benchmark",
        "label",
        "gold",
        "F1",
        "Familiarity",
        "seen",
        "mentions",
        "closest training labels",
    ]
    return [*out, ("F1 (%) per label in context", cols, labels, {0, 1, 5, 7})]


def view_lines(ev: Evaluation) -> list[str]:
    """The paper's views in words, how `else` was scored, and the notes."""
    lines = [f"misc: {misc_text(ev.request.misc)}"]
    v = ev.views
    if v is not None and ev.train is not None:
        t = ev.train.describe()
        lines.insert(0, f"training: {t['name']} ({t['kind']}; {t['labels']:,} labels, "
                        f"{t['mentions']:,} mentions); Familiarity {num(ev.familiarity())}")  # fmt: skip
        lines += [
            f"seen labels: {v['seen']['labels']}, mean F1 {pct(v['seen']['mean_f1'])}; unseen: "
            f"{v['unseen']['labels']}, mean F1 {pct(v['unseen']['mean_f1'])}",
            _fit_text(v["fit"]),
            *(f"{name.capitalize()} r of Familiarity and F1: {_r_text(v[name])}" for name in ("pearson", "spearman")),
        ]  # fmt: skip
    return lines + [f"note: {n}" for n in ev.notes()]


def _fit_text(fit: Mapping[str, Any]) -> str:
    if fit["slope"] is None:
        return f"fit of F1 on log10(training mentions): needs 3 seen labels of differing counts ({fit['n']})"
    return (f"fit over seen labels: F1 (%) = {100 * fit['slope']:.1f} log10(mentions) "
            f"{'+' if fit['intercept'] >= 0 else '-'} {abs(100 * fit['intercept']):.1f} (r² {num(fit['r2'])}, n {fit['n']})")  # fmt: skip


def _r_text(r: Mapping[str, Any]) -> str:
    if r["r"] is None:
        return f"undefined (n {r['n']}: under 3 labels, or F1 or Familiarity constant)"
    ci = f", 95% CI {r['ci'][0]:.3f} to {r['ci'][1]:.3f}" if r["ci"] else ""
    return f"{r['r']:.3f}{ci} (n {r['n']})"


def _sentences(by: Mapping[str, Sequence[int | None]]) -> str:
    scored, total = (sum(v[i] or 0 for v in by.values()) for i in (0, 1))
    return f"{scored:,}/{total:,}"


def runs_tables(result: RunsResult) -> list[Table]:
    """Table 3 (a row per run) and a Table 5 per build whose levels were trained on."""
    rows = [
        [r["name"], (r["training"] or {}).get("name", ""), str(len(r["seeds"])), _sentences(r["sentences"]),
         pct(r["f1"]) + ("" if r["f1_sd"] is None else f" ± {100 * r['f1_sd']:.1f}"),
         num(r["familiarity"]), pct(r["seen_share"]), num(r["pearson"])]
        for r in result.table3
    ]  # fmt: skip
    cols = [
        "run",
        "training",
        "seeds",
        "sentences",
        "macro F1 (%)",
        "Familiarity",
        "seen %",
        "Pearson r",
    ]
    out: list[Table] = [("Zero-shot F1 and Familiarity (the paper's Table 3)", cols, rows, {0, 1})]
    for g in result.table5:
        rows = [
            [lv["level"], lv["name"], num(lv["familiarity"]), pct(lv["f1"]),
             "–" if lv["ci"] is None else f"{pct(lv['ci'][0])} to {pct(lv['ci'][1])}", str(len(lv["seeds"]))]
            for lv in g["levels"]
        ]  # fmt: skip
        out.append((f"Levels of build {g['build']} ({g['config']}; the paper's Table 5)",
                    ["level", "run", "Familiarity", "macro F1 (%)", "95% CI", "seeds"], rows, {0, 1}))  # fmt: skip
    return out


def runs_lines(result: RunsResult) -> list[str]:
    """Each build's verdict (does F1 fall from low to high?), how `else` was scored, notes."""
    lines = [f"misc: {misc_text(result.misc)}"]
    for g in (g for g in result.table5 if g["falls"] is not None):
        order = ", ".join(f"{lv['level']} {pct(lv['f1'])}" for lv in g["levels"])
        broken = f"; not on {', '.join(g['broken'])}" if g["broken"] else "; on every benchmark"
        lines.append(f"verdict: F1 falls from level to level (build {g['build']}): "
                     f"{'yes' if g['falls'] else 'NO'} ({order}){broken}")  # fmt: skip
    return lines + [f"note: {n}" for n in result.to_dict()["notes"]]


def markdown(found: Sequence[Table], lines: Sequence[str]) -> str:
    """GitHub-flavoured Markdown tables and the lines under them."""
    out = []
    for title, cols, rows, text in found:
        out += [f"**{title}**", "", "| " + " | ".join(map(cell, cols)) + " |",
                "|" + "|".join("---" if i in text else "---:" for i in range(len(cols))) + "|",
                *("| " + " | ".join(map(cell, r)) + " |" for r in rows), ""]  # fmt: skip
    return "\n".join([*out, *(f"- {line}" for line in lines), ""])


def plot_png(
    points: Sequence[Mapping[str, Any]], views: Mapping[str, Any] | None, title: str
) -> bytes:
    """Familiarity against F1 per label (left) and training mentions against F1 for seen
    labels with the log-linear fit over their range (right); the same input, the same bytes."""
    pts = [p for p in points if p["f1"] is not None and p["familiarity"] is not None]
    seen = [p for p in pts if p["seen"] and p["mentions"] > 0]
    png: list[bytes] = []
    with figure(10.0, 4.2, png) as fig:
        left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        for group in ([p for p in pts if not p["seen"]], [p for p in pts if p["seen"]]):
            if group:
                left.scatter([p["familiarity"] for p in group], [100 * p["f1"] for p in group], s=18, alpha=0.75,
                             label=f"{'seen' if group[0]['seen'] else 'unseen'} in training ({len(group)})")  # fmt: skip
        r = (views or {}).get("pearson") or {}
        left.set(xlabel="Familiarity of the label", ylabel="F1 (%)", ylim=(-3, 103),
                 title=f"Familiarity and F1 (Pearson r {num(r.get('r'))})")  # fmt: skip
        right.scatter(
            [p["mentions"] for p in seen], [100 * p["f1"] for p in seen], s=18, color="#d95f02"
        )
        fit = (views or {}).get("fit") or {}
        if fit.get("slope") is not None:
            lo, hi = (float(np.log10(f([p["mentions"] for p in seen]))) for f in (min, max))
            xs = np.logspace(lo, hi, 50)
            right.plot(xs, 100 * (fit["slope"] * np.log10(xs) + fit["intercept"]), color="black",
                       label=f"F1 = {100 * fit['slope']:.1f} log10(x) + {100 * fit['intercept']:.1f}")  # fmt: skip
        right.set(xscale="log", xlabel="training mentions of the label (seen labels)", ylabel="F1 (%)",
                  ylim=(-3, 103), title=f"Mentions and F1 (n {len(seen)})")  # fmt: skip
        for ax in (left, right):
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8, frameon=False)
        fig.suptitle(title, fontsize=10)
        fig.subplots_adjust(left=0.07, right=0.98, bottom=0.13, top=0.84, wspace=0.25)
    return png[0]
