"""The gRPC contract: the stubs generated from protos/ into `genproto`
(`make proto`; never edited by hand). Imports nothing else."""
