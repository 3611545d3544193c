"""Names that become file or folder names, and text from the data shown to people.

    check_name("crossner-ai", "benchmark name")   # the name, or a BuildersError saying why not
    printable("a\\x1b[2Jb")                       # 'a\\\\x1b[2Jb': control characters escaped

A source, benchmark, scenario or split name ends up in a folder name under `--out` (METHOD.md
section 4), so it may not lead out of it: no `/`, `\\`, `..`, leading `.` or control character.
Labels and names come from the data and may hold anything; where they reach a terminal or a
card, control characters are shown escaped (`\\x1b`, `\\n`), never sent as they are.
"""

from __future__ import annotations

import re

from builders.errors import InvalidValue, opt

#: C0 and C1 control characters, DEL and the Unicode line and paragraph separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_BUT_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
#: File systems take 255 bytes a name; folder names add a suffix such as `-medium-shift`.
MAX_NAME_BYTES = 200


def printable(text: str, keep_lines: bool = False) -> str:
    """`text` with every control character written as its escape (`\\x1b`, `\\n`, `\\t`).

    Args:
        keep_lines: leave newlines and tabs (text made of lines, such as a rendered card).
    """
    pattern = _CONTROL_BUT_LINES if keep_lines else _CONTROL
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def quoted(label: str) -> str:
    """A label from the data in double quotes (`"medium"`, a `"` inside as `\\"`), where it
    stands beside words or level names that it could be read as (`"medium" from medium`),
    or holds spaces or commas that a list of labels separates by."""
    return '"' + label.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _fault(value: str) -> str | None:
    """Why `value` cannot be part of a folder name, or None."""
    if not value:
        return "it is empty"
    if _CONTROL.search(value):
        return "it holds a control character"
    if "/" in value or "\\" in value:
        return "it holds a path separator"
    if ".." in value:
        return "it holds `..`"
    if value.startswith("."):
        return "it starts with `.`"
    if value != value.strip():
        return "it starts or ends with a space"
    if len(value.encode("utf-8")) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    return None


def check_name(value: str, what: str, fix: str = "choose another") -> str:
    """`value` if it can be part of a file or folder name; else a BuildersError naming it.

    Args:
        what: what the value names, e.g. "source name" or "benchmark name".
        fix: what the user can do, e.g. "pass --name NAME".
    """
    fault = _fault(value)
    if fault is not None:
        raise InvalidValue(
            f"{what} {printable(repr(value))} cannot name a folder: {fault}. "
            f"Names may hold letters, digits, spaces, `-`, `_` and single dots; {fix}"
        )
    return value


def is_hub_id(text: str) -> bool:
    """`org/name`, as huggingface_hub's own check takes a Hub repo id (letters, digits, `-`,
    `_`, `.`; no `--` or `..`): what a dataset id looks like (and a relative path may too)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return "/" in text


def valid_org(org: str) -> str:
    """`org` if it can name a Hub user or organisation (the namespace of a Hub repo id).

    Raises:
        BuildersError: otherwise, with the value.
    """
    if not is_hub_id(f"{org or ''}/name"):  # one more `/` in `org` and it is no id
        raise InvalidValue(
            f"{opt('org')} must be a user or organisation name like `my-org`, got {org!r}"
        )
    return org


#: Characters git refuses in a ref name (`git check-ref-format`), and so the Hub in a tag.
_REF_CHARS = " ~^:?*[\\"


def _tag_fault(tag: str) -> str | None:
    """Why git (`git check-ref-format refs/tags/TAG`, and `git tag`'s own checks) would
    refuse `tag` as a tag name, or None."""
    bad = next((c for c in tag if c in _REF_CHARS), None)
    parts = tag.split("/")
    checks = (
        (not tag, "it is empty"),
        (bool(_CONTROL.search(tag)), "it holds a control character"),
        (bad == " ", "it holds a space"),
        (bad is not None and bad != " ", f"it holds `{bad}`"),
        (".." in tag, "it holds `..`"),
        ("@{" in tag, "it holds `@{`"),
        (tag in ("@", "HEAD"), f"`{tag}` is git's name for a revision"),
        (tag.startswith("-"), "it starts with `-`"),
        ("" in parts, "it starts or ends with `/` or holds `//`"),
        (any(p.startswith(".") for p in parts), "it or a part after `/` starts with `.`"),
        (any(p.endswith(".lock") for p in parts), "it or a part before `/` ends with `.lock`"),
        (tag.endswith("."), "it ends with `.`"),
    )
    return next((why for failed, why in checks if failed), None)


def valid_tag(tag: str) -> str:
    """`tag` if git and the Hub take it as a tag name (`git check-ref-format`'s rules): a
    tag they refuse would fail only after the commit is pushed, so it is refused first.

    Raises:
        BuildersError: otherwise, naming the option, the value and what is wrong with it.
    """
    fault = _tag_fault(tag)
    if fault is not None:
        raise InvalidValue(
            printable(
                f"{opt('tag')} must be a name git takes for a tag, like `v1.0`, got {tag!r}: "
                f"{fault}"
            )
        )
    return tag
