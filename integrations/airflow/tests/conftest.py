"""Fixtures: a real `weir serve` on a loopback port, and an Airflow home with its own database.

The weir binary is $WEIR_BIN, else the workspace's target/debug/weir (build it first:
`cargo build -p weir`). Airflow's settings are read when it is first imported, so the home and
its SQLite database are set up here, before any test module imports airflow.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="weir-airflow-home-"))
os.environ["AIRFLOW_HOME"] = str(AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{AIRFLOW_HOME}/airflow.db"
DAGS = Path(__file__).resolve().parent / "dags"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS)
sys.path.insert(0, str(DAGS))  # the tests import the DAG file as Airflow does
os.environ["AIRFLOW__LOGGING__BASE_LOG_FOLDER"] = str(AIRFLOW_HOME / "logs")


def weir_bin() -> str:
    path = os.environ.get("WEIR_BIN") or str(REPO / "target" / "debug" / "weir")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no weir binary at {path}: build it (`cargo build -p weir`) or set WEIR_BIN")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WeirServer:
    def __init__(self, url: str, admin_token: str, work: Path, proc: subprocess.Popen):
        self.url = url
        self.admin_token = admin_token
        self.work = work
        self.proc = proc
        self.token = ""  # a submitter token on project `default`, set by the fixture

    def api(self, method: str, path: str, token: str | None = None, **kw):
        import httpx

        headers = {"Authorization": f"Bearer {token or self.admin_token}"}
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kw)

    def wait_state(self, run_id: int, states: set[str], timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            run = self.api("GET", f"/v1/runs/{run_id}").json()
            if run["state"] in states:
                return run
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} stayed {run['state']}, expected one of {sorted(states)}")
            time.sleep(0.2)

    def connection_json(self, token: str | None = None) -> str:
        host, port = self.url.removeprefix("http://").split(":")
        return json.dumps(
            {"conn_type": "weir", "host": host, "port": int(port), "schema": "http", "password": token or self.token}
        )


@pytest.fixture(scope="session")
def weir(tmp_path_factory) -> WeirServer:
    work = tmp_path_factory.mktemp("weir")
    port = free_port()
    # The tasks' working folders: outside pytest's private (0700) temp dir, which the tasks'
    # user (weir-task when this runs as root) could not enter.
    task_root = Path(tempfile.mkdtemp(prefix="weir-airflow-work-"))
    task_root.chmod(0o711)
    args = [
        weir_bin(), "serve", "--data-dir", str(work / "data"), "--work-dir", str(task_root / "work"),
        "--listen", f"127.0.0.1:{port}", "--kill-grace", "2",
    ]
    if os.geteuid() != 0:
        args.append("--single-tenant")
    log = open(work / "serve.log", "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    import httpx

    while True:
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"weir serve did not come up: {(work / 'serve.log').read_text()[-2000:]}")
        time.sleep(0.2)
    server = WeirServer(url, (work / "data" / "admin.token").read_text().strip(), work, proc)
    created = server.api(
        "POST", "/v1/tokens", json={"name": "airflow", "grants": [{"project": "default", "role": "submitter"}]}
    )
    assert created.status_code in (200, 201), created.text
    server.token = created.json()["token"]
    os.environ["AIRFLOW_CONN_WEIR_DEFAULT"] = server.connection_json()
    yield server
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    shutil.rmtree(task_root, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """Airflow's metadata database, migrated once per session."""
    airflow = shutil.which("airflow", path=os.path.dirname(sys.executable)) or "airflow"
    out = subprocess.run([airflow, "db", "migrate"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return AIRFLOW_HOME
