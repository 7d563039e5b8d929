"""Opens the PostgreSQL stores and manifest from the settings (PostgreSQL
mode: `POSTGRES_URL`, tables in `POSTGRES_SCHEMA`); `factory` calls these."""

from __future__ import annotations

from services.core.analysis import TextAnalyzer
from services.core.errors import ConfigError
from services.storage.postgres.lexical import PostgresLexicalStore
from services.storage.postgres.manifest import PostgresManifest
from services.storage.postgres.run import RunConnection
from services.storage.postgres.vectors import PostgresVectorStore
from services.storage.settings import StoreSettings
from services.storage.storage import Storage


def postgres_url(settings: StoreSettings) -> str:
    if settings.postgres_url is None:
        raise ConfigError("PostgreSQL mode needs POSTGRES_URL")
    return settings.postgres_url.get_secret_value()


def open_postgres_storage(settings: StoreSettings, dim: int, second_dim: int = 0) -> Storage:
    """All three parts in one schema, sharing the connection of the run in
    flight, so a run commits as one transaction (`postgres_run`)."""
    run = RunConnection(
        postgres_url(settings), settings.postgres_schema, settings.postgres_timeout_s
    )
    vectors, lexical = open_postgres_stores(settings, dim, run, second_dim)
    try:
        return Storage(vectors, lexical, open_postgres_manifest(settings, run), run)
    except BaseException:
        lexical.close()
        vectors.close()
        raise


def open_postgres_stores(
    settings: StoreSettings, dim: int, run: RunConnection | None = None, second_dim: int = 0
) -> tuple[PostgresVectorStore, PostgresLexicalStore]:
    url = postgres_url(settings)
    vectors = PostgresVectorStore(
        url,
        settings.postgres_schema,
        dim,
        search_ef=settings.vector_search,
        pool_size=settings.postgres_pool_size,
        timeout_s=settings.postgres_timeout_s,
        run=run,
        second_dim=second_dim,
    )
    try:
        lexical = PostgresLexicalStore(
            url,
            settings.postgres_schema,
            field_boosts=settings.lexical_field_boosts,
            analyzer=TextAnalyzer(settings.lexical_cjk),
            pool_size=settings.postgres_pool_size,
            timeout_s=settings.postgres_timeout_s,
            run=run,
        )
    except BaseException:
        vectors.close()  # do not leak the pool when start-up fails half-way
        raise
    return vectors, lexical


def open_postgres_manifest(
    settings: StoreSettings, run: RunConnection | None = None
) -> PostgresManifest:
    return PostgresManifest(
        postgres_url(settings),
        settings.postgres_schema,
        pool_size=max(2, settings.postgres_pool_size // 2),
        timeout_s=settings.postgres_timeout_s,
        run=run,
    )
