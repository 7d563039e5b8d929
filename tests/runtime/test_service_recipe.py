"""The one start-up recipe (services.runtime.service.serve under run_main), with
fake settings, parts and apps: settings → parts → apps started in order,
stopped in reverse on a signal, the parts closed last; a configuration error
exits with status 2 and its message, whether it comes from the settings or
from an app's start, and stops what had started."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from services.core.errors import ConfigError, StoreUnavailable
from services.runtime import service
from services.runtime.server import run_main
from services.runtime.service import ServiceApp, ServiceRecipe, serve

pytestmark = pytest.mark.unit


@dataclass
class FakeSettings:
    log_level: str = "DEBUG"
    log_json: bool = False


@dataclass
class FakeServer:
    name: str
    journal: list[str]
    port: int = 0

    async def stop(self) -> None:
        self.journal.append(f"{self.name}.server.stop")


@dataclass
class FakeApp:
    name: str
    journal: list[str]
    port: int
    fail: Exception | None = None
    abandoned_work: bool = False
    stop_budget_s: float = 5.0
    signals_on_start: bool = False  # a SIGTERM while this app starts
    hangs_on_stop: bool = False  # fault injection: a stop that never ends
    ignores_cancel: bool = False  # … and that swallows its cancellation
    release: asyncio.Event = field(default_factory=asyncio.Event)  # ends a hung stop
    server: FakeServer = field(init=False)

    def __post_init__(self) -> None:
        self.server = FakeServer(self.name, self.journal)

    async def start(self) -> int:
        if self.fail is not None:
            self.journal.append(f"{self.name}.failed")
            raise self.fail
        self.server.port = self.port
        self.journal.append(f"{self.name}.start")
        if self.signals_on_start:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(0.05)  # the loop runs the handler meanwhile
        return self.port

    async def stop(self) -> None:
        self.journal.append(f"{self.name}.stop")
        while self.hangs_on_stop:
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                if not self.ignores_cancel:
                    raise


class FakeParts:
    def __init__(self, journal: list[str]) -> None:
        self.journal = journal

    def close(self) -> None:
        self.journal.append("parts.close")


def fake_recipe(
    journal: list[str],
    *,
    bad_setting: str | None = None,
    failing_app: Exception | None = None,
    bad_app: Exception | None = None,
) -> ServiceRecipe[FakeSettings, FakeParts]:
    """Two apps on fake parts; a third that fails to start with `failing_app`;
    `bad_setting` fails the settings, `bad_app` the building of the apps."""

    def load() -> FakeSettings:
        if bad_setting is not None:
            raise ConfigError(f"invalid settings: {bad_setting}")
        journal.append("settings")
        return FakeSettings()

    def open_parts(settings: FakeSettings) -> FakeParts:
        journal.append("parts")
        return FakeParts(journal)

    def make_apps(settings: FakeSettings, parts: FakeParts) -> Sequence[ServiceApp]:
        if bad_app is not None:
            raise bad_app
        journal.append("apps")
        apps = [FakeApp("first", journal, 1001), FakeApp("second", journal, 1002)]
        if failing_app is not None:
            apps.append(FakeApp("third", journal, 1003, fail=failing_app))
        return apps

    return ServiceRecipe(
        settings=load,
        logging=lambda settings: settings,
        parts=open_parts,
        apps=make_apps,
        context=lambda settings: {"mode": "fake"},
    )


@pytest.fixture(autouse=True)
def logging_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """The logging configuration asked for (the test process keeps its own),
    and no gc.freeze() of the test process."""
    calls: list[tuple[str, bool]] = []
    monkeypatch.setattr(service, "configure_logging", lambda *args: calls.append(args))
    monkeypatch.setattr(service, "freeze_start_up_objects", lambda: None)
    yield calls


async def exit_status(recipe: ServiceRecipe[FakeSettings, FakeParts]) -> object:
    """`run_main` as a process runs it, on an event loop of its own (off the
    test's); the exit status it asks for."""

    def run() -> object:
        try:
            run_main(lambda: serve(recipe))
        except SystemExit as exc:
            return exc.code
        return 0

    return await asyncio.to_thread(run)


async def test_apps_start_in_order_and_stop_in_reverse_on_sigterm(
    logging_calls: list[tuple[str, bool]],
) -> None:
    journal: list[str] = []
    loop = asyncio.get_running_loop()
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    serving = asyncio.create_task(serve(fake_recipe(journal)))
    try:
        # The signal once both apps serve (the loop's handler is in before).
        while "second.start" not in journal:
            assert not serving.done(), serving
            await asyncio.sleep(0.01)
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
        assert journal == ["settings", "parts", "apps", "first.start", "second.start"]
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(serving, 10)
    finally:  # the test process's own handlers back
        serving.cancel()
        for sig, handler in before.items():
            loop.remove_signal_handler(sig)
            if handler is not None:
                signal.signal(sig, handler)
    assert logging_calls == [("DEBUG", False)]
    assert journal[5:] == [
        "first.server.stop",  # every server stops accepting at once,
        "second.server.stop",
        "second.stop",  # then the apps stop in reverse order,
        "first.stop",
        "parts.close",  # and what they shared is closed last
    ]


async def test_a_sigterm_while_starting_starts_no_more_and_stops_gracefully(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signal after the first port answers but before the process is ready
    (a health probe passed, then the pod is stopped) stops what started; it
    must not kill the process with the signal's default action."""
    journal: list[str] = []
    logged: list[str] = []
    monkeypatch.setattr(service.log, "info", lambda event, **kw: logged.append(event))
    loop = asyncio.get_running_loop()
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    apps = [
        FakeApp("first", journal, 1001, signals_on_start=True),
        FakeApp("second", journal, 1002),
    ]
    try:
        await asyncio.wait_for(service.run_apps(apps, FakeParts(journal).close), 10)
    finally:
        for sig, handler in before.items():
            loop.remove_signal_handler(sig)
            if handler is not None:
                signal.signal(sig, handler)
    assert journal == ["first.start", "first.server.stop", "first.stop", "parts.close"]
    assert "services_ready" not in logged  # never said ready: it was stopping


async def test_a_bad_setting_exits_2_with_its_message_before_anything_opens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    journal: list[str] = []
    status = await exit_status(fake_recipe(journal, bad_setting="RAG_FAKE_PORT='many'"))
    assert status == 2
    assert "configuration error: invalid settings: RAG_FAKE_PORT='many'" in capsys.readouterr().err
    assert journal == []


async def test_a_start_failure_stops_the_apps_already_started_and_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    journal: list[str] = []
    taken = ConfigError("cannot listen on 127.0.0.1:1003: address in use")
    status = await exit_status(fake_recipe(journal, failing_app=taken))
    assert status == 2
    assert "configuration error: cannot listen on 127.0.0.1:1003" in capsys.readouterr().err
    assert journal == [
        "settings",
        "parts",
        "apps",
        "first.start",
        "second.start",
        "third.failed",
        "second.stop",
        "first.stop",
        "parts.close",
    ]


async def test_a_store_that_cannot_be_reached_exits_1_with_one_line_naming_the_variables(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A PostgreSQL or Qdrant down (or a URL that resolves nowhere) ended the
    start in two chained tracebacks, exit 1, no variable named (probe)."""
    journal: list[str] = []
    down = StoreUnavailable("postgres-manifest: cannot connect to PostgreSQL:\n pool timeout")
    status = await exit_status(fake_recipe(journal, failing_app=down))
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("cannot start: postgres-manifest: cannot connect to PostgreSQL: pool")
    assert "POSTGRES_URL" in err and "Traceback" not in err and err.count("\n") == 1
    assert journal[-3:] == ["second.stop", "first.stop", "parts.close"]


async def test_apps_that_cannot_be_built_close_the_parts() -> None:
    journal: list[str] = []
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER"):
        await serve(fake_recipe(journal, bad_app=ConfigError("OTEL_TRACES_EXPORTER: 'zipkin'")))
    assert journal == ["settings", "parts", "parts.close"]


@pytest.mark.parametrize("ignores_cancel", [False, True], ids=["cancellable", "deaf"])
async def test_a_stop_that_overruns_its_budget_exits_without_closing_the_parts(
    monkeypatch: pytest.MonkeyPatch, ignores_cancel: bool
) -> None:
    """A stop stuck past its budget must not keep the process alive, nor
    stop the other apps from stopping; the parts stay open under it."""
    journal: list[str] = []
    exits: list[str] = []
    logged: list[tuple[str, dict[str, object]]] = []
    monkeypatch.setattr(service, "exit_leaving_work_behind", lambda: exits.append("exit"))
    monkeypatch.setattr(service.log, "error", lambda event, **kw: logged.append((event, kw)))
    stuck = FakeApp(
        "stuck", journal, 1001, stop_budget_s=0.2, hangs_on_stop=True, ignores_cancel=ignores_cancel
    )
    apps = [stuck, FakeApp("other", journal, 1002)]

    async def no_signal(servers: object, stop: object = None) -> None:
        return None

    monkeypatch.setattr(service, "run_until_signal", no_signal)
    monkeypatch.setattr(service, "stop_requested", asyncio.Event)  # no handlers left behind
    monkeypatch.setattr(service, "freeze_start_up_objects", lambda: None)
    try:
        await asyncio.wait_for(service.run_apps(apps, FakeParts(journal).close), 10)
    finally:  # let the stuck stop end, so the test loop is left clean
        stuck.hangs_on_stop = False
        stuck.release.set()
        await asyncio.sleep(0.05)
    assert journal == ["stuck.start", "other.start", "other.stop", "stuck.stop"]
    assert exits == ["exit"]
    assert [event for event, _ in logged] == ["app_stop_overran"]
    threads = logged[0][1]["threads"]
    assert isinstance(threads, dict) and "MainThread" in threads


async def test_ctrl_c_during_start_up_exits_130_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ctrl-C while a model loads (before the signal handlers are in place)
    ended in a KeyboardInterrupt traceback."""
    journal: list[str] = []
    status = await exit_status(fake_recipe(journal, bad_app=KeyboardInterrupt()))
    assert status == 130
    err = capsys.readouterr().err
    assert "interrupted during start-up; nothing was served" in err and "Traceback" not in err
    assert journal[-1] == "parts.close"  # what was opened is closed


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"RAG_INDEXER_PORT": "50052"}, "RAG_INDEXER_PORT and RAG_RETRIEVER_PORT are both 50052"),
        (
            {"RAG_RETRIEVER_METRICS_PORT": "9465", "RAG_METRICS_ENABLED": "true"},
            "RAG_INDEXER_METRICS_PORT and RAG_RETRIEVER_METRICS_PORT are both 9465",
        ),
    ],
)
def test_the_stack_refuses_one_port_for_two_listeners_before_the_model_loads(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], named: str
) -> None:
    """The second bind failed after both models loaded, naming neither (probe)."""
    from services.stack.__main__ import recipe

    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=named):
        recipe().settings()


def test_the_stack_names_every_bad_setting_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the first settings class's errors were reported: one fix, one
    restart, then the next error (probe)."""
    from services.stack.__main__ import recipe

    monkeypatch.setenv("RAG_RETRIEVER_PORT", "65536")
    monkeypatch.setenv("RAG_CHUNK_TARGET_CHARS", "5s")
    monkeypatch.setenv("RAG_EMBEDDING_THREADS", "-1")  # read by both: said once
    with pytest.raises(ConfigError) as refused:
        recipe().settings()
    message = str(refused.value)
    assert "RAG_RETRIEVER_PORT='65536'" in message and "RAG_CHUNK_TARGET_CHARS='5s'" in message
    assert message.count("RAG_EMBEDDING_THREADS") == 1
