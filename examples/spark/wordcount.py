"""A small PySpark word count: `spark-submit wordcount.py FILE [SECONDS]`.

Prints one `word<TAB>count` line per word, most frequent first (ties by word), then `total N`.
With SECONDS, the driver then waits that long before stopping (tests use it to kill a running
application). weir's example of a stage that is a Spark application (examples/spark/workflow.yaml).
"""

import sys
import time

from pyspark.sql import SparkSession


def main():
    path = sys.argv[1]
    # No appName here: the name spark-submit was given (weir: `weir:ATTEMPT`) stays.
    spark = SparkSession.builder.getOrCreate()
    counts = (
        spark.sparkContext.textFile(path)
        .flatMap(lambda line: line.lower().split())
        .map(lambda word: (word.strip(".,;:!?\"'()"), 1))
        .filter(lambda pair: pair[0] != "")
        .reduceByKey(lambda a, b: a + b)
        .collect()
    )
    for word, n in sorted(counts, key=lambda p: (-p[1], p[0])):
        print(f"{word}\t{n}")
    print(f"total {sum(n for _, n in counts)}", flush=True)
    if len(sys.argv) > 2:
        time.sleep(float(sys.argv[2]))
    spark.stop()


if __name__ == "__main__":
    main()
