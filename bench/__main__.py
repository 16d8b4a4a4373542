"""`python -m bench [scenario ...]`: run every scenario, or the named ones."""

from __future__ import annotations

import argparse
import signal
import sys

from bench.scenarios import SCENARIOS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark the queue engine against a hand-written psycopg baseline.",
    )
    parser.add_argument(
        "scenarios",
        nargs="*",
        metavar="scenario",
        help=f"run only these (default: all): {', '.join(SCENARIOS)}",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed runs per figure; the median is reported (default: 3)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="seconds a load scenario (steady) runs each time (default: the scenario's own)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="jobs per second a load scenario's producer enqueues (default: the scenario's own)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="seconds each scenario may run before it is stopped and reports what it has "
        "(default: the scenario's own, else one hour)",
    )
    parser.add_argument("--list", action="store_true", help="print the scenario names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown:
        print(
            f"python -m bench: unknown scenario {unknown[0]!r}; "
            f"the scenarios are: {', '.join(SCENARIOS)}",
            file=sys.stderr,
        )
        return 2
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.duration is not None and args.duration <= 0:
        parser.error("--duration must be a positive number of seconds")
    if args.rate is not None and args.rate <= 0:
        parser.error("--rate must be a positive number of jobs per second")
    if args.deadline is not None and args.deadline <= 0:
        parser.error("--deadline must be a positive number of seconds")

    from bench.harness import run

    # A terminated bench (kill, `timeout`) unwinds like an interrupted one: the worker
    # fleets it started run in sessions of their own and are stopped only on the way out.
    signal.signal(signal.SIGTERM, _terminated)
    return run(
        list(dict.fromkeys(args.scenarios)) or list(SCENARIOS),
        repeats=args.repeats,
        duration=args.duration,
        rate=args.rate,
        deadline=args.deadline,
    )


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"terminated by signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
