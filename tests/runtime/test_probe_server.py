"""Probe and metrics server over real HTTP on loopback."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import Counter, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from memop.runtime.manager.server import Address, ProbeServer


def test_address_parsing() -> None:
    assert Address.parse(":8080") == Address("0.0.0.0", 8080)
    assert Address.parse("127.0.0.1:0") == Address("127.0.0.1", 0)
    assert Address.parse("[::1]:9") == Address("::1", 9)
    assert Address.parse("0") is None
    for bad in ("8080", "host:", "h:99999", "h:x"):
        with pytest.raises(ValueError, match="invalid bind address"):
            Address.parse(bad)


async def test_probes_reflect_checks_and_metrics_are_served() -> None:
    server = ProbeServer(probe_address=Address("127.0.0.1", 0), metrics_address=Address("127.0.0.1", 0))
    synced = {"value": False}
    server.add_readiness_check("cache-sync", lambda: None if synced["value"] else "waiting for caches")
    server.add_liveness_check("ping", lambda: None)
    await server.start()
    try:
        probes, metrics = server.bound["/readyz"], server.bound["/metrics"]
        assert probes != metrics
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://{probes}/healthz") as resp:
                assert (resp.status, await resp.text()) == (200, "ok")
            async with http.get(f"http://{probes}/readyz") as resp:
                assert resp.status == 500
                assert "cache-sync: waiting for caches" in await resp.text()
            synced["value"] = True
            async with http.get(f"http://{probes}/readyz?verbose") as resp:
                assert resp.status == 200
                assert "[+]cache-sync ok" in await resp.text()
            counter = Counter("memop_test_probe_server_total", "test counter")
            counter.inc(3)
            async with http.get(f"http://{metrics}/metrics") as resp:
                assert resp.status == 200
                families = {f.name: f for f in text_string_to_metric_families(await resp.text())}
            assert families["memop_test_probe_server"].samples[0].value == 3
            async with http.get(
                f"http://{metrics}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
            ) as resp:
                assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
                assert (await resp.text()).endswith("# EOF\n")
            async with http.get(f"http://{probes}/metrics") as resp:
                assert resp.status == 404
    finally:
        await server.stop()
    assert b"memop_test_probe_server_total" in generate_latest()


async def test_a_raising_check_fails_with_its_reason_and_shared_address_serves_all() -> None:
    address = Address("127.0.0.1", 0)
    server = ProbeServer(probe_address=address, metrics_address=address)

    def broken() -> str | None:
        raise RuntimeError("boom")

    server.add_liveness_check("broken", broken)
    await server.start()
    try:
        bound = server.bound["/healthz"]
        assert server.bound["/metrics"] == bound
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://{bound}/healthz") as resp:
                assert resp.status == 500
                assert "broken: check raised RuntimeError: boom" in await resp.text()
            async with http.get(f"http://{bound}/metrics") as resp:
                assert resp.status == 200
    finally:
        await server.stop()
