"""The CLI's parser class: positionals anywhere among options (imported by ``build_parser`` only,
so ``cli/fast.py``'s ``cat`` starts without argparse)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


class Parser(argparse.ArgumentParser):
    """A parser whose leaf commands take their positionals anywhere among their options, as
    tar takes members (``extract A -o DIR PATH``, ``ls A -l PATH``). ``add_subparsers`` makes
    every sub-parser of this class; a parser with sub-commands of its own parses as argparse
    does (its options first, then the sub-command, which gets the rest)."""

    _intermixing = False

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        if self._intermixing or not self._intermixable():
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # parse_known_intermixed_args calls back here, twice
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def _intermixable(self) -> bool:
        """No sub-commands and no REMAINDER (argparse cannot intermix those)."""
        return all(a.nargs not in (argparse.PARSER, argparse.REMAINDER)
                   for a in self._get_positional_actions())
