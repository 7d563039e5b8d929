"""One scrape of a service's /metrics page, for tests that assert on what
the services export (read over HTTP, parsed by prometheus_client's parser)."""

from __future__ import annotations

import urllib.request

import httpx
from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    """Sample name + labels → value."""

    def __init__(self, text: str) -> None:
        self.samples = [
            (sample.name, dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]

    @classmethod
    def fetch(cls, url: str | None) -> Scrape:
        assert url, "the metrics listener is not running"
        with urllib.request.urlopen(url, timeout=10) as response:
            return cls(response.read().decode())

    @classmethod
    async def fetch_async(cls, url: str | None) -> Scrape:
        """For a test whose event loop serves the app being scraped."""
        assert url, "the metrics listener is not running"
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(url)
        response.raise_for_status()
        return cls(response.text)

    def value(self, name: str, **labels: str) -> float:
        """The sum over the samples of `name` whose labels include `labels`."""
        wanted = labels.items()
        return sum(v for n, lbls, v in self.samples if n == name and wanted <= lbls.items())

    def exact(self, name: str, **labels: str) -> float:
        """The one sample with exactly these labels; KeyError when the series
        is not exported at all (not even at 0)."""
        for n, lbls, v in self.samples:
            if n == name and lbls == labels:
                return v
        raise KeyError((name, labels))

    def has(self, name: str) -> bool:
        return any(n == name for n, _, _ in self.samples)

    def label_values(self, name: str, label: str) -> set[str]:
        return {lbls[label] for n, lbls, _ in self.samples if n == name and label in lbls}
