"""Clearing a deferred task in a running Airflow deployment kills its weir run.

`airflow standalone` (API server, scheduler with the LocalExecutor, DAG processor, triggerer, on a
SQLite database of its own) runs the DAG `weir_clear`; once its task is deferred (the trigger
waits in the real triggerer), `airflow tasks clear` clears it: the triggerer cancels the trigger,
the trigger asks Airflow (RuntimeTaskInstance.get_task_states, through the triggerer's supervisor)
whether the task instance is still deferred, learns it is not, and kills the weir run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import DAGS, free_port

LOGICAL = "2026-03-05T00:00:00+00:00"


def airflow_env(home: Path, weir) -> dict:
    api = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__PARALLELISM": "2",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(api),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api}",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api}/execution/",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW_CONN_WEIR_DEFAULT": weir.connection_json(),
            "PYTHONPATH": os.pathsep.join(p for p in [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")] if p),
        }
    )
    return env


def airflow(env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["airflow", *args], env=env, capture_output=True, text=True, timeout=timeout)


def wait_for(what: str, check, timeout: float, log: Path):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:.0f} s; airflow standalone's log ends:\n{log.read_text()[-4000:]}")
        time.sleep(1)


def test_clearing_a_deferred_task_kills_the_weir_run(weir):
    home = Path(tempfile.mkdtemp(prefix="weir-airflow-live-"))
    env = airflow_env(home, weir)
    log = home / "standalone.log"
    proc = subprocess.Popen(
        ["airflow", "standalone"], env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        wait_for("airflow standalone is ready", lambda: "Airflow is ready" in log.read_text(errors="replace"), 300, log)
        triggered = wait_for(
            "the DAG weir_clear is parsed and triggered",
            lambda: (r := airflow(env, "dags", "trigger", "weir_clear", "--logical-date", LOGICAL, "-o", "json")).returncode == 0 and r,
            180,
            log,
        )
        af_run_id = json.loads(triggered.stdout[triggered.stdout.index("[") :])[0]["dag_run_id"]

        def deferred_with_a_running_weir_run():
            runs = [r for r in weir.api("GET", "/v1/runs", params={"limit": 500}).json()["runs"] if r["workflow"] == "af-clear"]
            if not runs or runs[0]["state"] != "running":
                return None
            states = airflow(env, "tasks", "states-for-dag-run", "weir_clear", af_run_id, "-o", "json")
            if states.returncode != 0 or '"deferred"' not in states.stdout:
                return None
            return runs[0]

        run = wait_for("the task deferred while its weir run runs", deferred_with_a_running_weir_run, 240, log)
        # the DAG has this one run and one task: clear it, as an operator would in the UI (no
        # `-t REGEX`: Airflow 3.1.8's CLI matches nothing with one, SerializedDAG.partial_subset)
        cleared = airflow(env, "tasks", "clear", "weir_clear", "-y")
        assert cleared.returncode == 0, cleared.stdout + cleared.stderr
        try:
            ended = weir.wait_state(run["id"], {"killed", "failed", "succeeded"}, timeout=120)
        except AssertionError as e:
            raise AssertionError(f"{e}\nairflow tasks clear said: {cleared.stdout[-2000:]}{cleared.stderr[-2000:]}") from e
        assert ended["state"] == "killed", ended
        # and the cleared task's next try started the work again, in a new run
        again = wait_for(
            "the next try's new weir run",
            lambda: [r for r in weir.api("GET", "/v1/runs", params={"limit": 500}).json()["runs"]
                     if r["workflow"] == "af-clear" and r["id"] != run["id"]],
            120,
            log,
        )
        assert len(again) == 1, again
        assert weir.api("GET", f"/v1/runs/{again[0]['id']}").json()["params"]["AIRFLOW_TRY"] == "2"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # a second run for the date may have been submitted by the cleared task's next try
        for r in weir.api("GET", "/v1/runs", params={"limit": 500}).json()["runs"]:
            if r["workflow"] == "af-clear" and r["state"] not in ("succeeded", "failed", "killed"):
                weir.api("POST", f"/v1/runs/{r['id']}/kill")
