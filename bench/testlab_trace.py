"""Write a synthetic test-lab trace, or a trace with modelled user estimates, as SWF.

    .venv/bin/python bench/testlab_trace.py OUT.swf [--seed N] [--days D] [--hosts H]
    .venv/bin/python bench/testlab_trace.py OUT.swf --estimates TRACE [--seed N] [--max-estimate S]

The first form writes the test-lab model's trace (``labq.sim.testlab``; docs/simulation.md
§ The test-lab workload); the second copies TRACE with field 9 drawn from Tsafrir's model of
user runtime estimates (``labq.sim.estimates``). Either file runs with ``labq sim --swf OUT.swf``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from labq.errors import InputError
from labq.sim import estimates, testlab


def main(argv: Sequence[str] | None = None) -> int:
    """Write the trace; one line saying what was written."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--days", type=int, default=testlab.TestLabModel.days)
    parser.add_argument("--hosts", type=int, default=testlab.TestLabModel.hosts)
    parser.add_argument("--estimates", metavar="TRACE", default=None)
    parser.add_argument("--max-estimate", type=int, default=None, metavar="SECONDS")
    args = parser.parse_args(argv)
    try:
        if args.estimates:
            count = estimates.write_estimated(
                args.estimates, args.out, max_estimate=args.max_estimate, seed=args.seed
            )
            print(f"{args.out}: {count} jobs of {args.estimates} with modelled estimates")
        else:
            model = testlab.TestLabModel(days=args.days, hosts=args.hosts)
            count = testlab.write(args.out, model, args.seed)
            print(f"{args.out}: {count} jobs, {args.hosts} hosts, {args.days} days")
    except (InputError, OSError) as exc:
        print(f"testlab_trace: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
