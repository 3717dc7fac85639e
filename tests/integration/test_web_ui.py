"""The web UI in a real browser: Debian's headless Chromium, driven over the DevTools
protocol (a websocket, with aiohttp) on a real job (in-process executor, no Spark). The
pages load, the numbers the overview and checkpoints tab show equal the REST JSON, a job
graph vertex is coloured by its subtasks' time shares, an operator named ``<script>`` shows
as text, the savepoint button (its confirmation accepted) produces a savepoint, and the
stop-and-drain button ends the job FINISHED with another; the overview and the Jobs tab
show the job's source rate, cores and CPU per record. The
page polls while no live stream is free and follows its stream once one is; it shows bytes
per vertex, and its Jobs tab lists this driver's finished job and a job archived by another
process, each with its final figures.
Screenshots go to ``docs/`` when ``CAIRN_SCREENSHOTS`` names that directory.

Skipped when ``/usr/bin/chromium`` is missing, except under CI (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cairn.common.job_status import JobStatus
from cairn.deploy.job_master_client import JobClient
from cairn.rest.registry import JobRegistry
from cairn.testing.processes import wait_for, wait_for_async
from tests.integration._elsewhere_job import RECORDS, run_elsewhere
from tests.integration.jobs import sequence_job

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
EARLIER = "earlier <b>job</b>"
pytestmark = [
    pytest.mark.slow,
    # Under CI (.ci/run installs Debian's chromium) a missing browser fails the test instead.
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM) and not os.environ.get("CI"),
        reason="chromium is not installed (apt-get install chromium)",
    ),
]


@pytest.fixture
def job(tmp_path: Path, registry_dir: str) -> Iterator[JobClient]:
    # A job that ended in another process (the Jobs tab lists it from the job archive) and a
    # finished job of this driver: the Jobs tab shows the final figures of both.
    assert run_elsewhere(tmp_path, fail_at=-1)[1] == "FINISHED"
    earlier = sequence_job(
        {"cairn.executor": "inprocess"}, str(tmp_path / "earlier"), records=2_000, keys=10
    ).execute_async(EARLIER)
    earlier.get_job_execution_result(60)
    env = sequence_job(
        {
            "cairn.executor": "inprocess",
            "execution.checkpointing.savepoint-dir": "file://" + str(tmp_path / "savepoints"),
            "metrics.latency.interval": "200",
        },
        str(tmp_path / "out"),
        records=10_000_000,
        keys=10,
        rate=5_000,
        checkpoint_dir=str(tmp_path / "chk"),
    )
    client = env.execute_async("web-ui <script>alert(1)</script>")
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    yield client
    if not client.get_job_status().is_globally_terminal_state():
        client.cancel()
    client.get_job_execution_result(60)


class Browser:
    """One headless Chromium page, driven over the DevTools protocol."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._next = 0
        self.dialogs: list[str] = []

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        await self._ws.send_json({"id": ident, "method": method, "params": params})
        while True:
            msg = json.loads((await self._ws.receive()).data)
            if msg.get("method") == "Page.javascriptDialogOpening":  # confirm(): accept it
                self.dialogs.append(msg["params"]["message"])
                self._next += 1  # its answer is not awaited: only ``ident``'s is
                accept = {"accept": True}
                await self._ws.send_json(
                    {"id": self._next, "method": "Page.handleJavaScriptDialog", "params": accept}
                )
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result

    async def js(self, expression: str) -> Any:
        r = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    async def wait_for(self, expression: str, timeout_s: float = 30) -> Any:
        """The value of the page's ``expression`` once it is truthy."""
        return await wait_for_async(lambda: self.js(expression), timeout_s, 0.2, expression)

    async def screenshot(self, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))


def _short_tmp() -> Path:
    """A directory with a short path for Chromium's sockets (removed at exit)."""
    path = Path(tempfile.mkdtemp(prefix="chromium-", dir="/tmp"))
    atexit.register(shutil.rmtree, path, True)
    return path


def start_chromium(profile: Path) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--window-size=1400,900",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Chromium puts its singleton socket under TMPDIR: below a test's tmp_path it can
        # exceed a Unix socket path's 107 bytes ("Socket path too long", then an abort).
        env={**os.environ, "TMPDIR": str(_short_tmp())},
    )
    port_file = profile / "DevToolsActivePort"

    def port_written() -> bool:
        assert proc.poll() is None, "chromium did not start"
        return port_file.exists() and bool(port_file.read_text().strip())

    wait_for(port_written, 30, 0.1, "chromium's DevToolsActivePort")
    port = port_file.read_text().split()[0]
    return proc, port


def rest(entry: Any, path: str) -> Any:
    req = urllib.request.Request(entry.endpoint + path)
    req.add_header("Authorization", f"Bearer {entry.token}")
    with urllib.request.urlopen(req, timeout=10) as response:
        return json.loads(response.read())


def test_the_web_ui_shows_the_job_and_takes_a_savepoint(job: JobClient, tmp_path: Path) -> None:
    entry = JobRegistry().find(job.get_job_id())
    assert entry is not None
    proc, port = start_chromium(tmp_path / "chromium")
    shots = os.environ.get("CAIRN_SCREENSHOTS")
    try:
        asyncio.run(_drive(entry, port, job, Path(shots) if shots else None))
    finally:
        proc.terminate()
        proc.wait(30)


async def _drive(entry: Any, port: str, job: JobClient, shots: Path | None) -> None:
    jid = job.get_job_id()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
            page = next(t for t in await r.json() if t["type"] == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            b = Browser(ws)
            await b.call("Page.enable")
            await b.call("Runtime.enable")
            await _polls_without_a_stream(b, http, entry)
            # Overview: the name is text (no script ran), the state and vertices are shown.
            name = await b.wait_for("document.getElementById('overview-name')?.textContent")
            assert name == "web-ui <script>alert(1)</script>"
            assert await b.js("document.querySelectorAll('main script').length") == 0
            assert b.dialogs == []
            # The numbers follow the REST JSON: records of the sink vertex as the metrics say.
            await b.wait_for("Number(document.getElementById('records-in-1')?.textContent) > 0")
            shown = int(await b.js("document.getElementById('records-in-1').textContent"))
            values = rest(
                entry, f"/jobs/{jid}/vertices/1/metrics?get=0.numRecordsIn,1.numRecordsIn"
            )
            now = sum(int(v["value"]) for v in values)
            assert 0 < shown <= now
            # Bytes of the network channels, from the vertex's metrics block; kept up to date
            # by the live event stream, not by polling.
            shown_bytes = await b.wait_for("document.getElementById('bytes-in-1')?.textContent")
            assert re.fullmatch(r"\d+ B|\d+\.\d (KiB|MiB|GiB)", shown_bytes), shown_bytes
            assert await b.js("document.getElementById('live').dataset.live") == "true"
            assert rest(entry, f"/jobs/{jid}")["vertices"][1]["metrics"]["read-bytes"] > 0
            # User metrics (the demo check's counters), summed over the subtasks as the
            # aggregated REST endpoint sums them.
            cell = 'document.querySelector(\'[id^="user-1-"][id$=".checked-sum"]\')'
            await b.wait_for(f"Number({cell}?.textContent) > 0")
            metric = (await b.js(f"{cell}.id"))[len("user-1-") : -len("-sum")]
            shown = int(await b.js(f"{cell}.textContent"))
            path = f"/jobs/{jid}/vertices/1/subtasks/metrics?get={metric}&agg=sum"
            (summed,) = rest(entry, path)
            assert summed["id"] == metric and metric.endswith(".checked")
            assert 0 < shown <= summed["sum"]
            out_of_sequence = metric.replace(".checked", ".outOfSequence")
            assert (
                await b.js(f"document.getElementById('user-1-{out_of_sequence}-max')?.textContent")
                == "0"
            )
            # Latency markers' histograms, under the ids /jobs/:jobid/metrics has them.
            scope = "source_id.sequence-source.operator_id.sequence-check.operator_subtask_index.0"
            p99 = await b.wait_for(f"document.getElementById('latency-{scope}-p99')?.textContent")
            assert float(p99) >= 0
            assert {"id": f"latency.{scope}.latency_p99"} in rest(entry, f"/jobs/{jid}/metrics")
            # What the job costs, from the cpu block of /jobs/:jobid: in-process workers
            # measure their task threads.
            cores = "Number(document.getElementById('overview-cores')?.textContent)"
            await b.wait_for(f"{cores} > 0")
            per_record = await b.wait_for(
                "(t => t !== '-' && t)(document.getElementById('overview-cpu-per-record')"
                "?.textContent)"
            )
            assert re.fullmatch(r"\d+\.\d \u00b5s", per_record), per_record
            rate = await b.js("document.getElementById('overview-rate').textContent")
            assert re.fullmatch(r"[\d.]+k? rec/s", rate), rate
            measured = await b.js("document.getElementById('overview-cpu-measured').textContent")
            assert measured.startswith("task threads only")
            cpu = rest(entry, f"/jobs/{jid}")["cpu"]
            assert cpu["measured"] == "task-thread" and cpu["cores-since-start"] > 0
            if shots:
                await b.screenshot(shots / "web-ui-overview.png")
            # Jobs: this job and the driver's finished one (names as text); a click on the
            # finished one shows its final figures.
            await b.js("document.querySelector('[data-tab=jobs]').click()")
            here = await b.wait_for(f"document.getElementById('job-name-{jid}')?.textContent")
            assert here == "web-ui <script>alert(1)</script>"
            # Its rate and cost next to it, as /jobs/overview has them.
            await b.wait_for(f"Number(document.getElementById('job-cores-{jid}')?.textContent) > 0")
            rate = await b.js(f"document.getElementById('job-rate-{jid}').textContent")
            assert rate.endswith(" rec/s"), rate
            assert "cpu" in rest(entry, "/jobs/overview")["jobs"][0]
            earlier = next(j for j in rest(entry, "/jobs/overview")["jobs"] if j["name"] == EARLIER)
            cell = f"document.getElementById('job-state-{earlier['jid']}')"
            assert await b.wait_for(f"{cell}?.textContent") == "FINISHED"
            await b.js(f"{cell}.click()")
            heading = await b.wait_for("document.getElementById('archived-name')?.textContent")
            assert heading == EARLIER + " (FINISHED)"
            assert await b.js("document.querySelectorAll('main b').length") == 0
            read = await b.js("document.getElementById('archived-records-in-1').textContent")
            assert read == "2000"
            if shots:
                await b.screenshot(shots / "web-ui-jobs.png")
            gone = next(j for j in rest(entry, "/jobs/overview")["jobs"] if j.get("archived"))
            assert await b.js(f"document.getElementById('job-name-{gone['jid']}').textContent") == (
                "elsewhere-job"
            )
            await b.js(f"document.getElementById('job-state-{gone['jid']}').click()")
            want = "elsewhere-job (FINISHED)"
            heading = "document.getElementById('archived-name')?.textContent"
            assert await b.wait_for(f"{heading} === {json.dumps(want)}")
            read = await b.js("document.getElementById('archived-records-in-1').textContent")
            assert read == str(RECORDS)
            # Job graph: one vertex per REST vertex, coloured by a time-share state.
            await b.js("document.querySelector('[data-tab=graph]').click()")
            states = await b.wait_for(
                "[...document.querySelectorAll('#job-graph g')].map(g => g.dataset.state)"
            )
            assert len(states) == 2 and set(states) <= {"busy", "bp", "idle"}
            if shots:
                await b.screenshot(shots / "web-ui-graph.png")
            # Checkpoints: the completed count equals the REST JSON's (taken in between).
            await b.js("document.querySelector('[data-tab=checkpoints]').click()")
            await b.wait_for("Number(document.getElementById('cp-completed')?.textContent) > 0")
            before = rest(entry, f"/jobs/{jid}/checkpoints")["counts"]["completed"]
            shown = int(await b.js("document.getElementById('cp-completed').textContent"))
            after = rest(entry, f"/jobs/{jid}/checkpoints")["counts"]["completed"]
            assert before - 2 <= shown <= after  # pushed every second
            # The savepoint button: confirmed, then a savepoint exists where the UI says.
            await b.js("document.getElementById('btn-savepoint').click()")
            location = await b.wait_for(
                "document.getElementById('message').dataset.savepoint", timeout_s=60
            )
            assert b.dialogs and b.dialogs[0].startswith("Savepoint job web-ui <script>")
            assert os.path.exists(os.path.join(location.removeprefix("file://"), "_metadata"))
            latest = rest(entry, f"/jobs/{jid}/checkpoints")["latest"]["savepoint"]
            assert latest is not None and latest["external_path"] == location
            # The next update (pushed every second) shows the savepoint as the latest.
            await b.wait_for(
                f"[...document.querySelectorAll('dd')].some(d => d.textContent === "
                f"{json.dumps(location)})"
            )
            if shots:
                await b.screenshot(shots / "web-ui-checkpoints.png")
            # Stop and drain: the page asks for a drained stop (the drain itself is tested
            # through REST and the CLI); the job ends FINISHED with a savepoint.
            await b.js(
                "window.sent = []; const f = window.fetch; window.fetch = (u, o) => "
                "{ window.sent.push([String(u), o && o.body]); return f(u, o); }"
            )
            await b.js("document.getElementById('btn-drain').click()")
            drained = await b.wait_for(
                f"(s => s !== {json.dumps(location)} && s)"
                "(document.getElementById('message').dataset.savepoint)",
                timeout_s=60,
            )
            assert b.dialogs[-1].startswith("Stop and drain job web-ui <script>")
            stops = [body for url, body in await b.js("window.sent") if url.endswith("/stop")]
            assert [json.loads(body) for body in stops] == [{"drain": True}]
            assert os.path.exists(os.path.join(drained.removeprefix("file://"), "_metadata"))
            job.get_job_execution_result(60)
            assert job.get_job_status() is JobStatus.FINISHED


async def _polls_without_a_stream(b: Browser, http: aiohttp.ClientSession, entry: Any) -> None:
    """All 16 live streams taken (the endpoint answers 503): the page polls; once they are
    free again it switches to its own stream (it retries every 5 s)."""
    headers = {"Authorization": f"Bearer {entry.token}"}
    url = f"{entry.endpoint}/jobs/{entry.job_id}/events"
    streams = [await http.get(url, headers=headers) for _ in range(16)]
    try:
        assert all(s.status == 200 for s in streams)
        async with http.get(url, headers=headers) as refused:
            assert refused.status == 503
        await b.call("Page.navigate", url=f"{entry.endpoint}/web/index.html#token={entry.token}")
        records = "Number(document.getElementById('records-in-1')?.textContent)"
        first = await b.wait_for(records)
        assert await b.wait_for(f"{records} > {first}", timeout_s=15)  # the next poll
        assert await b.js("document.getElementById('live').dataset.live") == "false"
    finally:
        for s in streams:
            s.close()
    assert await b.wait_for("document.getElementById('live').dataset.live === 'true'", 15)
