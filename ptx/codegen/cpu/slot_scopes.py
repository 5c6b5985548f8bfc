"""Alias scopes of the SoA area's register slots: each slot (a register's values, one element per thread, at its
frame offset times the block's thread count) is a scope of its own, so LLVM knows a region's slot loads and stores
do not overlap each other and vectorises its thread loop without a runtime overlap check per row."""

from __future__ import annotations

DOMAIN = 99999
SCOPE_BASE = 100000        # + the slot's frame offset
LIST_BASE = 300000         # lists of scopes, numbered as they are first asked for
MARK = "\x00slot\x00"


class SlotScopes:
    """The metadata suffixes of one region function's slot accesses. Slots at different frame offsets hold
    different registers (or the site word at 0), whose frame fields do not overlap, so neither do their arrays.
    Accesses other than these (global, shared, the warp exchange areas) carry no scope: they may alias anything."""

    def __init__(self, mctx):
        self.mctx = mctx
        self.used = set()

    def mark(self, off):
        """A mark to append to a load or store of slot `off` (it survives lines inserted before it; apply turns
        it into metadata)."""
        self.used.add(off)
        return f"{MARK}{off}{MARK}"

    def apply(self, *texts):
        """Replaces each mark in the lists of lines `texts` with the access's `!alias.scope` and `!noalias` (the
        other slots this function uses), or with nothing where the function uses one slot."""
        if len(self.used) < 2:
            for lines in texts:
                for i, line in enumerate(lines):
                    if MARK in line:
                        lines[i] = line[:line.index(MARK)]
            return
        st = self.mctx.__dict__.setdefault("slot_scope_lists", {})
        self.mctx.add_helper("slot.domain", f'!{DOMAIN} = distinct !{{!{DOMAIN}, !"zluda.soa"}}')

        def scope(off):
            self.mctx.add_helper(f"slot.scope.{off}",
                                 f"!{SCOPE_BASE + off} = distinct !{{!{SCOPE_BASE + off}, !{DOMAIN}}}")
            return f"!{SCOPE_BASE + off}"

        def listed(offs):
            key = tuple(sorted(offs))
            if key not in st:
                st[key] = LIST_BASE + len(st)
                self.mctx.add_helper(f"slot.list.{st[key]}",
                                     f"!{st[key]} = !{{{', '.join(scope(o) for o in key)}}}")
            return f"!{st[key]}"

        for lines in texts:
            for i, line in enumerate(lines):
                if MARK in line:
                    head, off, _ = line.split(MARK)
                    off = int(off)
                    lines[i] = f"{head}, !alias.scope {listed([off])}, !noalias {listed(self.used - {off})}"
