r"""Which packages a run's imports spend their time in, from Python's ``-X importtime`` lines.

    PYTHONPROFILEIMPORTTIME=1 python bench/lm_eval_phases.py ... 2>&1 | tee run.log
    python bench/import_times.py run.log --out imports.md

On the H100 machine the imports of an ``lm_eval`` run took 13-16 s, against 4-5 s on the
2-core VM (bench/README.md, "Why imports take longer on the device"). Two causes would
look different here: shared libraries slow to load (torch's CUDA libraries load inside
``torch._C``'s own time) would put the time in a few modules, bytecode compiled anew each
run or slow file-system calls would spread it over thousands.  Each module's own time
(``self``, its nested imports excluded) is counted once, under its top-level package, so
the package rows add up to the whole; the modules with the most of it follow.  Lines of
other output between the ``import time:`` lines are skipped, so a whole run's log will do.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)\s*$")
"""``import time: <self us> | <cumulative us> | <two spaces per level><module>``, as
CPython 3.7-3.13 writes it (the header line, whose fields are words, does not match)."""


class Import(NamedTuple):
    module: str
    self_us: int
    cumulative_us: int
    depth: int  # 0: imported by no module being imported (the run's own imports)


def parse(lines: Iterable[str]) -> list[Import]:
    """The ``-X importtime`` records among ``lines``, in the order Python wrote them."""
    found = []
    for line in lines:
        match = LINE.search(line)
        if match:
            self_us, cumulative_us, indent, module = match.groups()
            found.append(Import(module, int(self_us), int(cumulative_us), len(indent) // 2))
    return found


def by_package(imports: list[Import]) -> list[tuple[str, float, int]]:
    """(top-level package, seconds of its modules' own time, modules), most time first."""
    seconds: dict[str, float] = defaultdict(float)
    modules: dict[str, int] = defaultdict(int)
    for record in imports:
        package = record.module.partition(".")[0]
        seconds[package] += record.self_us / 1e6
        modules[package] += 1
    return sorted(((p, seconds[p], modules[p]) for p in seconds), key=lambda r: -r[1])


def report(imports: list[Import], source: str, packages: int = 15, modules: int = 15) -> str:
    """Markdown: the total, the packages with the most own time, the slowest modules."""
    total = sum(record.self_us for record in imports) / 1e6
    lines = [
        f"`{source}`: {len(imports)} modules imported in {total:.2f} s of their own time "
        "(`-X importtime`, the run's later imports included; each module's time without its "
        "nested imports, so that the rows add up)",
        "",
        "| package | seconds | modules |",
        "| --- | ---: | ---: |",
    ]
    rows = by_package(imports)
    lines += [f"| {p} | {s:.2f} | {n} |" for p, s, n in rows[:packages]]
    if len(rows) > packages:
        rest = rows[packages:]
        lines.append(
            f"| {len(rest)} others | {sum(r[1] for r in rest):.2f} | {sum(r[2] for r in rest)} |"
        )
    lines += ["", "| module | own seconds | with its imports |", "| --- | ---: | ---: |"]
    slowest = sorted(imports, key=lambda r: -r.self_us)[:modules]
    lines += [
        f"| {r.module} | {r.self_us / 1e6:.3f} | {r.cumulative_us / 1e6:.3f} |" for r in slowest
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="output holding -X importtime lines")
    parser.add_argument("--out", type=Path, help="also write the report here (markdown)")
    args = parser.parse_args(argv)
    with args.log.open(encoding="utf-8", errors="replace") as handle:
        imports = parse(handle)
    if not imports:
        raise SystemExit(f"{args.log}: no `import time:` lines (run with -X importtime)")
    text = report(imports, args.log.name)
    print(text, end="")
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
