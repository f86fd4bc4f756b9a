"""Adding a key or a table to a TOML document (tomlkit) without moving a comment away from what it describes.

tomlkit keeps a comment and the blank lines before a table (or a key) in the body of whatever precedes it: in

    [floors.baseline]
    tok_s = 89.5

    # ceilings at 4 streams, set by hand
    [floors.baseline.c4]

the comment is the last entry of ``[floors.baseline]``'s body. ``table["new"] = value`` puts a new key after it (and
tomlkit puts a new table at the very end of the body, after a comment that closed the last subtable), so the comment
ends up above the new entry instead of above the table it was written for. :func:`put` places a new entry before
such a run of comments and blank lines instead; an existing key is replaced where it is.
"""

from __future__ import annotations

from typing import Any

from tomlkit.container import Container
from tomlkit.items import AoT, Comment, Null, Table, Whitespace

__all__ = ["put"]


def _trivia(entry: tuple[Any, Any]) -> bool:
    """A comment, a blank line, or what a deleted key leaves (tomlkit keeps a Null in its place)."""
    return entry[0] is None and isinstance(entry[1], (Comment, Whitespace, Null))


def _trailing(body: list[tuple[Any, Any]]) -> int:
    """Where the run of comments and blank lines that ends ``body`` begins (``len(body)`` when there is none)."""
    i = len(body)
    while i > 0 and _trivia(body[i - 1]):
        i -= 1
    return i


def _container(t: Any) -> Container | None:
    if isinstance(t, Container):
        return t
    if isinstance(t, Table) and isinstance(t.value, Container):
        return t.value
    return None  # an out-of-order table (tomlkit's proxy) or anything else: tomlkit places it


def put(table: Any, key: str, value: Any) -> None:
    """``table[key] = value``, keeping every comment attached to the key or table it precedes.

    An existing key is replaced in place. A new key goes right after the table's last key (before the comments
    and blank lines that lead to its first subtable, or to the next table of the file). A new table goes at the
    end of the table, and the comments and blank lines that ended its last entry (which lead to whatever follows
    in the file) move to the new table's end."""
    box = _container(table)
    if box is None or key in table:
        table[key] = value
        return
    body = box.body
    if not isinstance(value, (Table, AoT)):
        last = max((i for i, (k, v) in enumerate(body) if k is not None and not isinstance(v, (Table, AoT))),
                   default=-1)
        at = last + 1
        if at < len(body) and _trivia(body[at]):
            box._insert_at(at, key, value)  # before the comments that lead to a subtable or the next table
        else:
            table[key] = value  # nothing in between: tomlkit's place (before the first subtable, or last)
        return
    new = _container(value)
    if new is None:  # an array of tables: tomlkit places it
        table[key] = value
        return
    # a table: take the trailing comments off the deepest last entry, add the table, end the new table with them
    holder: Container = box
    while _trailing(holder.body) == len(holder.body) and holder.body and isinstance(holder.body[-1][1], Table):
        inner = _container(holder.body[-1][1])
        if inner is None:
            break
        holder = inner
    cut = _trailing(holder.body)
    moved = holder.body[cut:]
    del holder.body[cut:]  # unkeyed entries at the end: no index of a key moves
    table[key] = value
    new.body.extend(moved)  # the new table's own end (a super table's body holds tables only)
