"""Names that become file or folder names (METHOD.md section 4: no `/`, `\\`, `..`, leading
`.` or control character), and text from the data shown to people with its control
characters escaped (`\\x1b`, `\\n`).
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
    """`text` with every control character escaped (`\\x1b`); `keep_lines` leaves newlines
    and tabs."""
    pattern = _CONTROL_BUT_LINES if keep_lines else _CONTROL
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def quoted(label: str) -> str:
    """A label from the data in double quotes (`"medium"`, a `"` inside as `\\"`), so that it
    is not read as a level name or split at its commas."""
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
    try:  # a lone surrogate: bytes of another encoding, as Python decodes a file name
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid UTF-8"
    if size > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    return None


def check_name(value: str, what: str, fix: str = "choose another") -> str:
    """`value` if it can be part of a file or folder name; else an error naming `what` it
    names ("source name") and the `fix` ("pass --name NAME")."""
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
    """`org` if it can name a Hub user or organisation; else an error with the value."""
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
    """`tag` if git and the Hub take it as a tag name (refused here, not after the push)."""
    fault = _tag_fault(tag)
    if fault is not None:
        raise InvalidValue(
            printable(
                f"{opt('tag')} must be a name git takes for a tag, like `v1.0`, got {tag!r}: "
                f"{fault}"
            )
        )
    return tag
