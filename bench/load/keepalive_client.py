"""The gateway load test's HTTP client: plain HTTP/1.1 keep-alive over
asyncio streams."""

from __future__ import annotations

import asyncio


class KeepAliveClient:
    """A minimal HTTP/1.1 keep-alive client, one connection per virtual client.

    The load generator shares two cores with the server it measures; httpx
    spends about as much CPU per request as the gateway itself, which would
    make the numbers the generator's. This needs a few dozen microseconds."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post_json(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        lines = [
            f"POST {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
        ]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self._writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        status = int((await self._reader.readline()).split(b" ", 2)[1])
        length, close = 0, False
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "connection" and "close" in value.lower():
                close = True
        payload = await self._reader.readexactly(length)
        if close:
            await self.close()
        return status, payload

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
