"""docs/benchmarks.md rendered from bench/results/*.json, the latency plot
and the targets each figure is compared with."""
