"""The Qdrant collection a server-mode vector store (`qdrant_server`) keeps
its chunks in, checked at every start-up.

Created when missing (cosine, the embedding model's dimension, keyword
payload indexes for every filter field) and refused when it exists with
another size or distance: silently searching vectors of one model with
another model's query embedding returns garbage.
"""

from __future__ import annotations

import grpc
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from services.core.errors import ConfigError
from services.storage.base import RESCORE_OVERSAMPLING, VectorQuantization
from services.storage.payload import GENERATION_FIELD, METADATA_TERMS_FIELD

# Filter fields get keyword indexes; scope_id is the tenant key, which lets
# Qdrant co-locate a tenant's points and plan per-tenant searches cheaply.
TENANT_FIELD = "scope_id"
KEYWORD_INDEX_FIELDS = ("locale", "doc_id", "url", METADATA_TERMS_FIELD)


def ensure_collection(
    client: QdrantClient,
    collection: str,
    dim: int,
    *,
    shards: int,
    replication_factor: int,
    timeout: int,
    quantization: VectorQuantization,
) -> None:
    """The collection, created if missing, checked, every filter field indexed.
    An existing collection keeps its own quantization (an operator's choice)."""
    if not client.collection_exists(collection):
        try:
            client.create_collection(
                collection,
                vectors_config=vector_params(dim, quantization),
                quantization_config=quantization_config(quantization),
                # Fixed at creation: see deploy/README.md on sharding.
                shard_number=shards,
                replication_factor=replication_factor,
                timeout=timeout,
            )
        except (UnexpectedResponse, grpc.RpcError):
            # Another replica may have created it between our check and create.
            if not client.collection_exists(collection):
                raise
    info = client.get_collection(collection)
    check_compatible(collection, dim, info.config.params.vectors)
    _create_missing_indexes(client, collection, set(info.payload_schema or {}), timeout)


def vector_params(dim: int, quantization: VectorQuantization) -> models.VectorParams:
    """Cosine; with INT8 the originals on disk, read only to rescore (as in
    Qdrant Edge, services.storage.embedded.qdrant_edge)."""
    on_disk = True if quantization is VectorQuantization.INT8 else None
    return models.VectorParams(size=dim, distance=models.Distance.COSINE, on_disk=on_disk)


def quantization_config(quantization: VectorQuantization) -> models.ScalarQuantization | None:
    if quantization is VectorQuantization.NONE:
        return None
    int8 = models.ScalarQuantizationConfig(
        type=models.ScalarType.INT8, quantile=0.99, always_ram=True
    )
    return models.ScalarQuantization(scalar=int8)


def search_params(hnsw_ef: int) -> models.SearchParams:
    """`hnsw_ef` candidates, twice the limit rescored by the original vectors
    where the collection is quantized (said, not left to the server's own
    default), as Qdrant Edge asks (services.storage.embedded.qdrant_edge)."""
    rescored = models.QuantizationSearchParams(rescore=True, oversampling=RESCORE_OVERSAMPLING)
    return models.SearchParams(hnsw_ef=hnsw_ef, quantization=rescored)


def _create_missing_indexes(
    client: QdrantClient, collection: str, indexed: set[str], timeout: int
) -> None:
    # Checked on every start so a start-up interrupted after creating the
    # collection still ends with every filter field indexed.
    # Filterable-HNSW sub-graphs for the scope only (as in Qdrant Edge,
    # services.storage.embedded.qdrant_edge): the other filters select rows
    # too few to need a graph or too many to need their own.
    keyword = models.KeywordIndexType.KEYWORD
    no_graph = models.KeywordIndexParams(type=keyword, enable_hnsw=False)
    wanted: dict[str, models.KeywordIndexParams | models.IntegerIndexParams] = {
        TENANT_FIELD: models.KeywordIndexParams(type=keyword, is_tenant=True),
        **{field: no_graph for field in KEYWORD_INDEX_FIELDS},
        GENERATION_FIELD: models.IntegerIndexParams(
            type=models.IntegerIndexType.INTEGER, lookup=True, range=True, enable_hnsw=False
        ),
    }
    for field, schema in wanted.items():
        if field not in indexed:
            client.create_payload_index(
                collection, field, field_schema=schema, wait=True, timeout=timeout
            )


def check_compatible(collection: str, dim: int, vectors: object) -> None:
    """Refuse a collection of named vectors, or of another size or distance."""
    if not isinstance(vectors, models.VectorParams):
        raise ConfigError(
            f"Qdrant collection {collection!r} (QDRANT_COLLECTION) uses named vectors; "
            "this service needs a single unnamed vector per point"
        )
    if vectors.size != dim or vectors.distance != models.Distance.COSINE:
        raise ConfigError(
            f"Qdrant collection {collection!r} (QDRANT_COLLECTION) holds "
            f"{vectors.size}-d vectors with {vectors.distance.value} distance, but the "
            f"embedding model produces {dim}-d vectors compared by Cosine; point "
            "QDRANT_COLLECTION at a new collection and re-index (see deploy/README.md)"
        )
