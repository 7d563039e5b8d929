"""The embedding engine: runtimes (sentence-transformers, ONNX Runtime,
packed e5), packaged models, ONNX export, query batching. Imports services.core only."""
