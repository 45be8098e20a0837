#!/usr/bin/env bash
# Fill fuzz/corpus/<target>/ with seeds from examples/ and the shared trace samples
# (../shared/traces beside the repository). Run from anywhere; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
traces=../shared/traces
c=fuzz/corpus
mkdir -p $c/{cluster_file,workload_file,trace_swf,trace_sls,trace_alibaba,usage_csv,fair_scheduler_xml}

cp examples/cluster.yaml examples/cluster-small.yaml examples/story/cluster-*.yaml $c/cluster_file/
cp examples/workload.yaml $c/workload_file/workload.yaml
cp examples/story/workload.yaml $c/workload_file/story.yaml
# The workload the harness pairs with fuzzed clusters, written for the small cluster.
sed -n '/^pub const WORKLOAD: &str = "/,/^";/p' fuzz/src/lib.rs | sed '1s/^pub const WORKLOAD: &str = "//;$d' \
  > $c/workload_file/harness.yaml

# SWF: no sample ships with the project; a few lines in the archive's format.
cat > $c/trace_swf/small.swf <<'SWF'
; Version: 2.2
; MaxProcs: 32
 1   0  3  10  2  -1  -1  2  -1  -1  1  1  1  -1  1  -1  -1  -1
 2   5  0  10  2  -1  2048  2  20  4096  0  2  7  -1  2  1  -1  -1
 3   9  0   0  4  -1  -1  4  -1  -1  5  3  7  -1  1  -1  -1  -1
 3   9  0   4  4  -1  -1  4  -1  -1  2  3  7  -1  1  -1  -1  -1
SWF

if [ -d "$traces" ]; then
  cp "$traces"/yarn-sls/*.json $c/trace_sls/
  # The Alibaba sample is 3.2 MB: seeds are its first rows, a few jobs at a time.
  head -c 4000 "$traces"/alibaba-2018-dag/selected_DAGs.csv > $c/trace_alibaba/head.csv
  sed -n '2000,2060p' "$traces"/alibaba-2018-dag/selected_DAGs.csv > $c/trace_alibaba/middle.csv
else
  echo "no $traces beside the repository: trace seeds skipped" >&2
fi

head -c 4000 examples/usage.csv > $c/usage_csv/head.csv
cargo run --quiet --release -p weir -- export --format yarn-fair --cluster examples/cluster.yaml \
  > $c/fair_scheduler_xml/cluster.xml
cargo run --quiet --release -p weir -- export --format yarn-fair --cluster examples/cluster-small.yaml \
  > $c/fair_scheduler_xml/cluster-small.xml
ls $c | while read -r t; do echo "$t: $(ls $c/$t | wc -l) seeds"; done
