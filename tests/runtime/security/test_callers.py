"""The callers list: parsing, lookup by token and certificate, scope grants,
live reload for rotation, and the start-up exposure rule."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from services.core.errors import ConfigError, InvalidArgument, PermissionDenied
from services.runtime.security import caller_source
from services.runtime.security.caller_source import CallerSource
from services.runtime.security.callers import Role, ScopeGrant, load_callers_text
from services.runtime.security.exposure import check_exposure, is_loopback
from services.runtime.security.scopes import check_writable, readable_scope

pytestmark = pytest.mark.unit

READER_TOKEN = "reader-token-0123456789abcdef"
NEXT_READER_TOKEN = "reader-token-next-0123456789ab"
WRITER_TOKEN = "writer-token-0123456789abcdef"
CI_TOKEN = "ci-token-0123456789abcdef012"


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def callers_toml(*reader_tokens: str) -> str:
    hashes = ", ".join(f'"{sha(t)}"' for t in reader_tokens)
    return f"""
[[caller]]
name = "gateway"
roles = ["reader"]
scopes = ["docs"]
token_sha256 = [{hashes}]

[[caller]]
name = "pipeline"
roles = ["writer"]
scopes = ["docs", "blog"]
token_sha256 = ["{sha(WRITER_TOKEN)}"]

[[caller]]
name = "ops"
roles = ["admin"]
scopes = ["*"]
cert_names = ["ops.rag.internal"]
"""


def test_tokens_and_certificate_names_map_to_callers() -> None:
    registry = load_callers_text(callers_toml(READER_TOKEN), "test")
    gateway = registry.by_token(READER_TOKEN)
    assert gateway is not None and gateway.name == "gateway"
    assert gateway.has(Role.READER) and not gateway.has(Role.WRITER)
    assert registry.by_token(READER_TOKEN + "x") is None
    assert registry.by_token("") is None
    ops = registry.by_cert_names(["something-else", "ops.rag.internal"])
    assert ops is not None and ops.has(Role.WRITER) and ops.scopes.allows("anything")
    assert registry.by_cert_names(["gateway"]) is None


def test_json_form_is_accepted_and_token_files_are_hashed(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(WRITER_TOKEN + "\n")
    text = json.dumps(
        [{"name": "ci", "roles": ["writer"], "scopes": ["docs"], "token_files": [str(token_file)]}]
    )
    registry = load_callers_text(text, "RAG_AUTH_CALLERS")
    caller = registry.by_token(WRITER_TOKEN)
    assert caller is not None and caller.name == "ci"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"roles": ["reader"], "scopes": ["a"], "cert_names": ["x"]}, "needs a non-empty 'name'"),
        ({"name": "x", "roles": ["root"], "scopes": ["a"], "cert_names": ["x"]}, "roles must"),
        ({"name": "x", "roles": ["reader"], "scopes": [], "cert_names": ["x"]}, "scopes must"),
        ({"name": "x", "roles": ["reader"], "scopes": ["a"]}, "needs token_sha256"),
        ({"name": "x", "roles": ["reader"], "scopes": ["a"], "token_sha256": ["ab"]}, "64 hex"),
    ],
)
def test_a_bad_entry_is_a_config_error_naming_the_caller(entry: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_callers_text(json.dumps([entry]), "RAG_AUTH_CALLERS")


def _watched(path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> CallerSource:
    """A callers file with `text`, read by a source that checks it on every call."""
    monkeypatch.setattr(caller_source, "RELOAD_CHECK_S", 0.0)
    path.write_text(text)
    return CallerSource.from_file(path)


def test_the_file_is_reread_when_it_changes_and_a_broken_file_keeps_the_last_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "callers.toml"
    source = _watched(path, callers_toml(READER_TOKEN), monkeypatch)
    assert source.current().by_token(NEXT_READER_TOKEN) is None
    # Rotation step 1: both tokens valid.
    _rewrite(path, callers_toml(READER_TOKEN, NEXT_READER_TOKEN))
    assert source.current().by_token(READER_TOKEN) is not None
    assert source.current().by_token(NEXT_READER_TOKEN) is not None
    # Step 2: the old one removed.
    _rewrite(path, callers_toml(NEXT_READER_TOKEN))
    assert source.current().by_token(READER_TOKEN) is None
    # A file that no longer parses does not lock everyone out.
    _rewrite(path, "[[caller]\nbroken")
    assert source.current().by_token(NEXT_READER_TOKEN) is not None


def test_a_change_that_keeps_the_old_modification_time_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cp -p`, `rsync -t` and tar keep a file's time (and here its size)."""
    path = tmp_path / "callers.toml"
    source = _watched(path, callers_toml(READER_TOKEN), monkeypatch)
    before = path.stat()
    path.write_text(callers_toml(NEXT_READER_TOKEN))  # a hash of the same length
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert source.current().by_token(READER_TOKEN) is None
    assert source.current().by_token(NEXT_READER_TOKEN) is not None


def _with_token_file(token_file: Path, *reader_tokens: str) -> str:
    return (
        callers_toml(*(reader_tokens or (READER_TOKEN,)))
        + f"""
[[caller]]
name = "ci"
roles = ["writer"]
scopes = ["docs"]
token_files = ["{token_file}"]
"""
    )


def test_a_rotated_token_file_is_read_without_a_change_to_the_callers_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file, path = tmp_path / "ci-token", tmp_path / "callers.toml"
    token_file.write_text(CI_TOKEN)
    source = _watched(path, _with_token_file(token_file), monkeypatch)
    assert source.current().by_token(CI_TOKEN) is not None
    token_file.write_text(NEXT_READER_TOKEN)
    ci = source.current().by_token(NEXT_READER_TOKEN)
    assert ci is not None and ci.name == "ci"
    assert source.current().by_token(CI_TOKEN) is None  # the old token is revoked
    token_file.unlink()  # gone: its token goes with it
    assert source.current().by_token(NEXT_READER_TOKEN) is None


def test_a_revocation_applies_while_another_callers_token_file_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rest of the list applies; only the unreadable file's token is out."""
    token_file, path = tmp_path / "ci-token", tmp_path / "callers.toml"
    token_file.write_text(CI_TOKEN)
    source = _watched(
        path, _with_token_file(token_file, READER_TOKEN, NEXT_READER_TOKEN), monkeypatch
    )
    token_file.unlink()
    _rewrite(path, _with_token_file(token_file, NEXT_READER_TOKEN))
    assert source.current().by_token(READER_TOKEN) is None  # the gateway's token revoked
    assert source.current().by_token(CI_TOKEN) is None
    token_file.write_text(CI_TOKEN)  # back: the file is read again
    assert source.current().by_token(CI_TOKEN) is not None
    with pytest.raises(ConfigError, match="cannot read token file"):
        token_file.unlink()
        CallerSource.from_file(path)  # at start-up it stays an error


def test_two_callers_sharing_a_token_are_refused() -> None:
    text = callers_toml(READER_TOKEN).replace(sha(WRITER_TOKEN), sha(READER_TOKEN))
    with pytest.raises(ConfigError, match="'gateway' and 'pipeline' share a token"):
        load_callers_text(text, "test")


def _rewrite(path: Path, text: str) -> None:
    path.write_text(text)
    later = time.time() + 1  # a distinct modification time even on coarse clocks
    os.utime(path, (later, later))


def test_scope_grants_decide_reads_and_writes() -> None:
    registry = load_callers_text(callers_toml(READER_TOKEN), "test")
    gateway, pipeline = registry.by_token(READER_TOKEN), registry.by_token(WRITER_TOKEN)
    assert gateway is not None and pipeline is not None
    assert readable_scope("", gateway) == "docs"  # the one scope it holds
    assert readable_scope("docs", gateway) == "docs"
    with pytest.raises(PermissionDenied, match="may not read scope 'blog'"):
        readable_scope("blog", gateway)
    with pytest.raises(InvalidArgument, match=r"filter\.scope_id: required"):
        readable_scope("", pipeline)  # two scopes: it must say which
    check_writable(["docs", "blog"], pipeline, "documents[0].scope_id")
    with pytest.raises(PermissionDenied, match=r"documents\[0\].scope_id.*'other'"):
        check_writable(["other"], pipeline, "documents[0].scope_id")
    assert ScopeGrant.of(["*", "docs"]).scopes is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("", False),
        ("10.0.0.5", False),
        ("indexer.svc", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_non_loopback_server_needs_tls_and_callers_or_an_explicit_insecure_setting() -> None:
    with pytest.raises(ConfigError) as err:
        check_exposure("0.0.0.0", tls=False, auth=False, allow_insecure=False)
    for setting in ("RAG_TLS_CERT_FILE", "RAG_AUTH_CALLERS_FILE", "RAG_ALLOW_INSECURE"):
        assert setting in str(err.value)
    with pytest.raises(ConfigError, match="without caller identity"):
        check_exposure("0.0.0.0", tls=True, auth=False, allow_insecure=False)
    check_exposure("0.0.0.0", tls=True, auth=True, allow_insecure=False)
    check_exposure("0.0.0.0", tls=False, auth=False, allow_insecure=True)
    check_exposure("127.0.0.1", tls=False, auth=False, allow_insecure=False)


def test_service_settings_refuse_an_exposed_plaintext_server_when_they_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from services.indexer.settings import IndexerSettings
    from services.runtime.settings import load_settings

    monkeypatch.setenv("RAG_HOST", "0.0.0.0")
    with pytest.raises(ConfigError, match=r"RAG_HOST='0\.0\.0\.0' is not a loopback address"):
        load_settings(IndexerSettings)
    monkeypatch.setenv("RAG_ALLOW_INSECURE", "true")
    assert load_settings(IndexerSettings).host == "0.0.0.0"


def test_a_client_picks_up_a_rotated_token_file(tmp_path: Path) -> None:
    from services.runtime.security.client import TokenSource

    path = tmp_path / "token"
    path.write_text(READER_TOKEN + "\n")
    source = TokenSource(path=path)
    assert source.current() == READER_TOKEN
    _rewrite(path, NEXT_READER_TOKEN)
    assert source.current() == NEXT_READER_TOKEN  # the next call uses the new token
    path.unlink()  # mid-rotation: the last token read is kept
    assert source.current() == NEXT_READER_TOKEN


def test_a_certificate_is_known_by_its_common_name_and_dns_names_only(tmp_path: Path) -> None:
    from cryptography import x509

    from services.runtime.security.server_auth import identity_names
    from tests.support.certs import Pki

    pki = Pki.create(tmp_path)
    alternative = [
        x509.DNSName("ops.rag.internal"),
        x509.UniformResourceIdentifier("gateway.rag"),
        x509.RFC822Name("admin.rag"),
    ]
    pair = pki.issue_named("mixed", "pipeline.rag", alternative)
    assert identity_names(pair.cert.read_bytes()) == ("pipeline.rag", "ops.rag.internal")
    assert identity_names(b"-----BEGIN CERTIFICATE-----\ngarbage\n") == ()
