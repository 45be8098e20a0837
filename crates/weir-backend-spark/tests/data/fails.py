"""A PySpark driver that fails, for the Spark backends' tests: `spark-submit fails.py MARKER`.

The first attempt (no MARKER file yet) writes MARKER and raises (Python then exits 1); every
later attempt exits with status 3. No SparkSession is made: what is tested is how the driver's
end reaches weir (spark-submit's exit status, the standalone worker's driver log), and a
session would only add a JVM context's start to each attempt.
"""

import os
import sys


def main():
    marker = sys.argv[1]
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write("first attempt\n")
        print("weir test: first attempt, raising", flush=True)
        raise RuntimeError("weir test: the driver raises")
    print("weir test: a later attempt, exiting 3", flush=True)
    print("weir test: this goes to the driver's stderr", file=sys.stderr, flush=True)
    sys.exit(3)


if __name__ == "__main__":
    main()
