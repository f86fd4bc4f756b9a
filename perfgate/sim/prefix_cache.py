"""The simulated server's radix cache: which prefix of a prompt an earlier prefill already computed (SGLang's
``cached_tokens``); ``/flush_cache`` clears it."""

from __future__ import annotations

from typing import Any

__all__ = ["PrefixCache"]


class PrefixCache:
    """Radix-cache stand-in: a token trie of previously prefilled prompts."""

    MAX_NODES = 2_000_000

    def __init__(self) -> None:
        self.root: dict[int, Any] = {}
        self.nodes = 0

    def match_and_insert(self, ids: list[int]) -> int:
        node, matched, inserting = self.root, 0, False
        for tok in ids:
            nxt = node.get(tok)
            if nxt is None:
                inserting = True
                if self.nodes >= self.MAX_NODES:
                    break
                nxt = {}
                node[tok] = nxt
                self.nodes += 1
            elif not inserting:
                matched += 1
            node = nxt
        return min(matched, max(0, len(ids) - 1))

    def clear(self) -> None:
        self.root, self.nodes = {}, 0
