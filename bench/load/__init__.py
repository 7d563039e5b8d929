"""Speed: Retrieve latency and throughput through the RPCs (`make bench`),
the gateway under load, and the model-bound, query-embedding and reranker
reference measurements."""
