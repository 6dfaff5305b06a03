"""Command line: ``python -m experiments <command>``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="Gram matrices of every kernel on one data set")
    demo.add_argument("--dataset", default="BasicMotions")
    demo.add_argument("--data-dir", default=None)
    demo.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import gram_table, print_table

        print_table(gram_table(args.dataset, args.data_dir, args.device), args.dataset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
