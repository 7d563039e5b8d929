"""What every benchmark command shares: paths, the real service processes,
ingest through the Indexer, the closed-loop Retrieve driver and the run
record written into every result file."""
