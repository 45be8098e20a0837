"""WeirRunOperator in real Airflow DAG runs against a real `weir serve`: `dag.test()` runs the
task in Airflow's task runner and a deferred task's trigger as the triggerer runs it. The DAGs
are in tests/dags/weir_test_dags.py (the dags folder these tests give Airflow)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import DAGS

UTC = dt.timezone.utc


def dag(dag_id: str):
    import weir_test_dags

    return getattr(weir_test_dags, dag_id)


def weir_runs(weir, workflow_name: str) -> list[dict]:
    runs = weir.api("GET", "/v1/runs", params={"limit": 500}).json()["runs"]
    return [r for r in runs if r["workflow"] == workflow_name]


def task_state(dr, task_id="run") -> str:
    return str(dr.get_task_instance(task_id).state)


@pytest.mark.parametrize("dag_id,workflow", [("weir_ok_deferred", "af-ok-deferred"), ("weir_ok_worker", "af-ok-worker")])
def test_a_dag_run_submits_for_its_logical_date_and_succeeds(weir, airflow_db, capfd, dag_id, workflow):
    logical = dt.datetime(2026, 3, 1, 6, 0, tzinfo=UTC)
    dr = dag(dag_id).test(logical_date=logical)
    out = capfd.readouterr()
    assert task_state(dr) == "success"
    (run,) = weir_runs(weir, workflow)
    assert run["state"] == "succeeded"
    assert run["logical_date"] == logical.isoformat()
    # the task's output reached the Airflow task log
    assert "[main.s.0 stdout] from-weir" in out.out + out.err
    # the run id is the task's XCom, for the next task
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        pushed = session.scalars(XComModel.get_many(key="weir_run_id", dag_ids=dr.dag_id, run_id=dr.run_id)).first()
        assert pushed is not None and XComModel.deserialize_value(pushed) == run["id"]


def test_a_failed_weir_run_fails_the_task(weir, airflow_db):
    dr = dag("weir_fail").test(logical_date=dt.datetime(2026, 3, 2, tzinfo=UTC))
    assert task_state(dr) == "failed"
    (run,) = weir_runs(weir, "af-fail")
    assert run["state"] == "failed"


def test_a_run_someone_else_started_for_the_date_is_waited_for(weir, airflow_db):
    """weir's one active run per (workflow, logical date): a run another submitter started (a
    person, a backfill) is the task's run; no second run starts. (A run an earlier try of the same
    task started is killed and started again: tests/test_live_airflow.py.)"""
    import weir_test_dags

    logical = dt.datetime(2026, 3, 3, tzinfo=UTC)
    first = weir.api(
        "POST",
        "/v1/runs",
        token=weir.token,
        json={"workflow": weir_test_dags.workflow("af-retry", "sleep 15"), "logical_date": logical.isoformat()},
    )
    assert first.status_code == 201, first.text
    dr = dag("weir_retry").test(logical_date=logical)
    assert task_state(dr) == "success"
    runs = weir_runs(weir, "af-retry")
    assert [r["id"] for r in runs] == [first.json()["id"]]
    assert runs[0]["state"] == "succeeded"


def run_of_an_earlier_try(weir, workflow_name: str, dag_id: str, logical: dt.datetime, command: str) -> int:
    """A run as an earlier try (try 0) of the task instance `dag.test(logical_date=logical,
    run_after=logical)` makes would have left it: the instance is
    `DAG/TASK/RUN_ID/MAP_INDEX`, the run id `manual__` + the run-after date
    (DagRun.generate_run_id with a logical date), the map index -1 (not mapped)."""
    import weir_test_dags

    instance = f"{dag_id}/run/manual__{logical.isoformat()}/-1"
    r = weir.api(
        "POST",
        "/v1/runs",
        token=weir.token,
        json={
            "workflow": weir_test_dags.workflow(workflow_name, command),
            "logical_date": logical.isoformat(),
            "params": {"AIRFLOW_TASK_INSTANCE": instance, "AIRFLOW_TRY": "0"},
        },
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_a_run_an_earlier_try_started_is_killed_and_started_again(weir, airflow_db):
    """The default: a new try that finds the run its own earlier try started (a cleared task, a
    worker that died) kills it and submits again, so clearing restarts the work. The control
    for the next test: it shows the earlier try's run is recognised as this task's."""
    logical = dt.datetime(2026, 3, 6, tzinfo=UTC)
    earlier = run_of_an_earlier_try(weir, "af-restart", "weir_restart", logical, "sleep 300")
    dr = dag("weir_restart").test(logical_date=logical, run_after=logical)
    assert task_state(dr) == "success"
    runs = {r["id"]: r for r in weir_runs(weir, "af-restart")}
    assert len(runs) == 2, runs
    assert runs.pop(earlier)["state"] == "killed"
    (again,) = runs.values()
    assert again["state"] == "succeeded"
    again = weir.api("GET", f"/v1/runs/{again['id']}").json()
    assert again["params"]["AIRFLOW_TRY"] == "1", again


def test_reattach_on_restart_waits_for_the_run_an_earlier_try_started(weir, airflow_db):
    """`reattach_on_restart=True`: the same situation, but the new try waits for the earlier
    try's run to finish (no kill, no second run) and succeeds with it."""
    logical = dt.datetime(2026, 3, 7, tzinfo=UTC)
    # Long enough to be still running when `dag.test` gets to the task (~10 s here).
    earlier = run_of_an_earlier_try(weir, "af-reattach", "weir_reattach", logical, "sleep 30")
    dr = dag("weir_reattach").test(logical_date=logical, run_after=logical)
    assert task_state(dr) == "success"
    runs = weir_runs(weir, "af-reattach")
    assert [r["id"] for r in runs] == [earlier], f"a second run: was the first over before the task began? {runs}"
    assert runs[0]["state"] == "succeeded"


def test_stopping_the_airflow_task_kills_the_weir_run(weir, airflow_db):
    """Clearing or marking a running task makes Airflow's supervisor send SIGTERM to the task
    process (ActivitySubprocess._send_heartbeat_if_needed, on the API server's 409), whose
    handler calls the operator's on_kill (task_runner._execute_task's _on_term)."""
    proc = subprocess.Popen(
        [sys.executable, str(DAGS / "weir_test_dags.py"), "weir_stop", "2026-03-04T00:00:00+00:00"],
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not (runs := weir_runs(weir, "af-stop")) or runs[0]["state"] != "running":
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the weir run never started"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        run = weir.wait_state(runs[0]["id"], {"killed", "failed", "succeeded"}, timeout=60)
        assert run["state"] == "killed"
    finally:
        proc.kill()
        proc.wait()
