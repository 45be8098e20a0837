"""The client of weir's HTTP API (docs/serve.md, docs/openapi.json), sync and async.

The connection (type ``weir``, default id ``weir_default``):

- ``host``: the server, either a URL (``https://weir.example:8470``) or a host name with ``port``
  and ``schema`` (``http`` or ``https``, default ``http``);
- ``password``: the API token (a project-scoped submitter token is enough to submit, read and
  kill the project's runs), or ``extra.token_file``: a file holding it;
- ``extra.ca_file``: a CA bundle for a server whose certificate a private CA signed;
  ``extra.timeout``: seconds per request (default 30).

For example ``AIRFLOW_CONN_WEIR_DEFAULT='{"conn_type": "weir", "host": "127.0.0.1", "port": 8470,
"password": "wr_..."}'``. The token is sent as ``Authorization: Bearer``; it is never logged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
from airflow.sdk import BaseHook

#: States after which a run never changes (RunState in docs/openapi.json).
FINAL_STATES = frozenset({"succeeded", "failed", "killed"})


class WeirApiError(Exception):
    """weir answered with an error (its ``ErrorBody``), or not at all."""

    def __init__(self, status: int, code: str, message: str, body: dict | None = None):
        self.status = status
        self.code = code
        self.body = body or {}
        super().__init__(f"weir answered {status} {code}: {message}")


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """Where the server is and how to authenticate: what a connection resolves to."""

    base_url: str
    token: str
    verify: Any = True
    timeout: float = 30.0

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}

    def __repr__(self) -> str:  # never show the token
        return f"Endpoint(base_url={self.base_url!r})"


def endpoint_from_connection(conn) -> Endpoint:
    """Read an Airflow connection of type ``weir``; every missing piece is named."""
    extra = conn.extra_dejson if conn.extra else {}
    host = (conn.host or "").strip()
    if not host:
        raise ValueError(f"connection {conn.conn_id!r}: `host` is empty (the weir server, e.g. 127.0.0.1)")
    if "://" in host:
        base = host.rstrip("/")
    else:
        scheme = (conn.schema or "http").strip() or "http"
        if scheme not in ("http", "https"):
            raise ValueError(f"connection {conn.conn_id!r}: `schema` is {scheme!r}; it must be http or https")
        base = f"{scheme}://{host}" + (f":{conn.port}" if conn.port else "")
    token = conn.password or ""
    if not token and extra.get("token_file"):
        path = extra["token_file"]
        try:
            with open(path, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            raise ValueError(f"connection {conn.conn_id!r}: extra.token_file {path!r}: {e.strerror}") from e
    if not token:
        raise ValueError(
            f"connection {conn.conn_id!r}: no token (set `password` to a weir API token, or extra.token_file)"
        )
    verify: Any = extra.get("ca_file", True)
    timeout = float(extra.get("timeout", 30))
    return Endpoint(base_url=base, token=token, verify=verify, timeout=timeout)


def _raise_for(resp: httpx.Response) -> None:
    if resp.status_code < 400:
        return
    try:
        body = resp.json().get("error", {})
    except ValueError:
        body = {}
    raise WeirApiError(resp.status_code, body.get("code", "http_error"), body.get("message", resp.text[:200]), body)


def submit_body(
    *,
    workflow: dict | None,
    workflow_name: str | None,
    project: str | None,
    logical_date: str,
    params: dict[str, str] | None,
) -> dict:
    """The body of ``POST /v1/runs`` (``SubmitRun``): exactly one of workflow / workflow_name."""
    if (workflow is None) == (workflow_name is None):
        raise ValueError("give exactly one of `workflow` (an inline workflow) or `workflow_name` (a registered one)")
    body: dict[str, Any] = {"logical_date": logical_date}
    if workflow is not None:
        body["workflow"] = workflow
    else:
        body["workflow_name"] = workflow_name
        if project:
            body["project"] = project
    if params:
        body["params"] = {str(k): str(v) for k, v in params.items()}
    return body


class WeirHook(BaseHook):
    """weir's API with the token of an Airflow connection (see the module's documentation)."""

    conn_name_attr = "weir_conn_id"
    default_conn_name = "weir_default"
    conn_type = "weir"
    hook_name = "weir"

    def __init__(self, weir_conn_id: str = default_conn_name, endpoint: Endpoint | None = None):
        super().__init__()
        self.weir_conn_id = weir_conn_id
        self._endpoint = endpoint

    # -- connection -------------------------------------------------------------------------

    def endpoint(self) -> Endpoint:
        if self._endpoint is None:
            self._endpoint = endpoint_from_connection(self.get_connection(self.weir_conn_id))
        return self._endpoint

    async def aendpoint(self) -> Endpoint:
        if self._endpoint is None:
            self._endpoint = endpoint_from_connection(await self.aget_connection(self.weir_conn_id))
        return self._endpoint

    def _client(self) -> httpx.Client:
        e = self.endpoint()
        return httpx.Client(base_url=e.base_url, headers=e.headers(), verify=e.verify, timeout=e.timeout)

    async def _aclient(self) -> httpx.AsyncClient:
        e = await self.aendpoint()
        return httpx.AsyncClient(base_url=e.base_url, headers=e.headers(), verify=e.verify, timeout=e.timeout)

    # -- sync -------------------------------------------------------------------------------

    def submit_run(self, body: dict, idempotency_key: str | None = None) -> tuple[int, bool]:
        """Submit; ``(run id, created)``. A run already active for the (workflow, logical date)
        is not an error: its id comes back with ``created`` False (weir's uniqueness is what
        makes Airflow's retries safe)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        with self._client() as c:
            resp = c.post("/v1/runs", json=body, headers=headers)
        if resp.status_code == 409:
            existing = (resp.json().get("error") or {}).get("existing_run")
            if existing is not None:
                return int(existing), False
        _raise_for(resp)
        return int(resp.json()["id"]), True

    def get_run(self, run_id: int) -> dict:
        with self._client() as c:
            resp = c.get(f"/v1/runs/{run_id}")
        _raise_for(resp)
        return resp.json()

    def kill_run(self, run_id: int) -> dict:
        with self._client() as c:
            resp = c.post(f"/v1/runs/{run_id}/kill")
        _raise_for(resp)
        return resp.json()

    def task_log(self, run_id: int, task: str, *, stream: str = "stdout", offset: int = 0) -> bytes:
        """The latest attempt's output from byte ``offset`` on (empty when none yet)."""
        with self._client() as c:
            resp = c.get(f"/v1/runs/{run_id}/tasks/{task}/logs", params={"stream": stream, "offset": offset})
        if resp.status_code == 404:
            return b""
        _raise_for(resp)
        return resp.content

    # -- async (the trigger) ----------------------------------------------------------------

    async def aget_run(self, run_id: int) -> dict:
        async with await self._aclient() as c:
            resp = await c.get(f"/v1/runs/{run_id}")
        _raise_for(resp)
        return resp.json()

    async def akill_run(self, run_id: int) -> dict:
        async with await self._aclient() as c:
            resp = await c.post(f"/v1/runs/{run_id}/kill")
        _raise_for(resp)
        return resp.json()

    async def atask_log(self, run_id: int, task: str, *, stream: str = "stdout", offset: int = 0) -> bytes:
        async with await self._aclient() as c:
            resp = await c.get(f"/v1/runs/{run_id}/tasks/{task}/logs", params={"stream": stream, "offset": offset})
        if resp.status_code == 404:
            return b""
        _raise_for(resp)
        return resp.content


def task_names(run: dict) -> list[tuple[str, int]]:
    """``(log name, attempts)`` of every task of a run that has started at least once; the log
    name is ``job.stage.index`` (what ``/v1/runs/{id}/tasks/{task}/logs`` takes)."""
    out = []
    for job in run.get("jobs", []):
        for t in job.get("tasks", []):
            if t.get("attempts", 0) > 0:
                out.append((f"{job['name']}.{t['stage']}.{t['index']}", int(t["attempts"])))
    return out


class LogFollower:
    """What of each task's output has been shown: one offset per (task, stream) for the latest
    attempt; a new attempt starts from 0 again with a header line."""

    STREAMS = ("stdout", "stderr")

    def __init__(self):
        self.offsets: dict[tuple[str, str], int] = {}
        self.attempts: dict[str, int] = {}

    def plan(self, run: dict) -> list[tuple[str, str, int, str | None]]:
        """The reads to make now: ``(task, stream, offset, header to print first or None)``."""
        reads = []
        for task, attempts in task_names(run):
            header = None
            if self.attempts.get(task) != attempts:
                self.attempts[task] = attempts
                for s in self.STREAMS:
                    self.offsets[(task, s)] = 0
                header = f"--- weir task {task}, attempt {attempts} ---"
            for s in self.STREAMS:
                reads.append((task, s, self.offsets[(task, s)], header))
                header = None
        return reads

    def advance(self, task: str, stream: str, data: bytes, *, final: bool = False) -> list[str]:
        """Record what was read; the lines to log. A partial last line waits for the rest,
        unless the run has ended (``final``)."""
        if not data:
            return []
        end = len(data) - 1 if final else data.rfind(b"\n")
        if end < 0:
            return []
        self.offsets[(task, stream)] += end + 1
        text = data[: end + 1].decode("utf-8", errors="replace")
        return [f"[{task} {stream}] {line}" for line in text.splitlines()]
