"""The scale-out backends: Qdrant and OpenSearch servers over the network."""
