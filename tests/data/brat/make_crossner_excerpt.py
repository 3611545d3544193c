"""Write docs/crossner-ai-excerpt.{txt,ann}: CrossNER AI test's first 3 sentences as brat.

Run from this folder: python make_crossner_excerpt.py. The source is ../crossner/ai-test.txt
(CrossNER, zliucr/CrossNER `ai/test.txt`, MIT). Each sentence is one line of the .txt, its
tokens joined by spaces except CrossNER's split-off plural `s`, glued back onto its word
("model s" -> "models", so the entity "Gaussian mixture model" ends inside a word); its BIO
entities become T lines. Then, by hand, what the reader must count or keep: a nested entity
inside another, a discontinuous one, a relation, attributes (A and the older M), a note and
an equivalence.
"""

from pathlib import Path

HERE = Path(__file__).parent
sentences = [b.splitlines() for b in (HERE / "../crossner/ai-test.txt").read_text().split("\n\n")]
lines, ents = [], []
offset = 0
for block in sentences[:3]:
    text, spans = "", []
    for row in block:
        token, tag = row.split("\t")
        if token == "s" and text:  # CrossNER's split-off plural
            start = len(text)
            text += token
        else:
            text += (" " if text else "") + token
            start = len(text) - len(token)
        if tag.startswith("B-"):
            spans.append([offset + start, offset + len(text), tag[2:]])
        elif tag.startswith("I-"):
            spans[-1][1] = offset + len(text)
    lines.append(text)
    ents += spans
    offset += len(text) + 1
doc = "\n".join(lines) + "\n"


def find(words: str, after: int = 0) -> tuple[int, int]:
    start = doc.index(words, after)
    return start, start + len(words)


ann = [f"T{i}\t{t} {s} {e}\t{doc[s:e]}" for i, (s, e, t) in enumerate(ents, 1)]
n = len(ents)
lang = find("Language Resources")  # nested in "International Language Resources ... Conference"
elra, conf = find("ELRA"), find("conference")  # "ELRA ... conference": discontinuous
ann += [
    f"T{n + 1}\tfield {lang[0]} {lang[1]}\tLanguage Resources",
    f"T{n + 2}\tconference {elra[0]} {elra[1]};{conf[0]} {conf[1]}\tELRA conference",
    "R1\torganiser Arg1:T4 Arg2:T5\t",  # ELRA organises LREC
    "A1\tAcronym T5",
    "M1\tAcronym T4",
    "#1\tAnnotatorNotes T5\tLREC is short for T6",
    "*\tAlias T5 T6",
]
(HERE / "docs/crossner-ai-excerpt.txt").write_text(doc)
(HERE / "docs/crossner-ai-excerpt.ann").write_text("\n".join(ann) + "\n")
