"""WeirHook against a real `weir serve`: submit, the 409 that makes retries safe, logs, kill."""

from __future__ import annotations

import asyncio

from weir_test_dags import workflow

from weir_provider.hooks.weir import Endpoint, LogFollower, WeirApiError, WeirHook, submit_body
from weir_provider.triggers.weir import WeirRunTrigger


def hook_for(weir, token=None) -> WeirHook:
    return WeirHook(endpoint=Endpoint(base_url=weir.url, token=token or weir.token))


def test_submit_then_the_same_date_again_gives_the_active_run(weir):
    hook = hook_for(weir)
    body = submit_body(
        workflow=workflow("hook-dup", "sleep 30"), workflow_name=None, project=None, logical_date="2026-01-01", params=None
    )
    first, created = hook.submit_run(body, idempotency_key="k1")
    assert created
    second, created_again = hook.submit_run(body, idempotency_key="k2")
    assert (second, created_again) == (first, False)
    hook.kill_run(first)
    assert weir.wait_state(first, {"killed"})["state"] == "killed"
    # once it has ended, the same date runs again (a retry after a failure)
    third, created_third = hook.submit_run(body, idempotency_key="k3")
    assert created_third and third != first
    hook.kill_run(third)


def test_logs_and_params_reach_the_task(weir):
    hook = hook_for(weir)
    body = submit_body(
        workflow=workflow("hook-logs", 'echo "out $WEIR_PARAM_GREETING"; echo oops >&2'),
        workflow_name=None,
        project=None,
        logical_date="2026-01-02",
        params={"GREETING": "hi"},
    )
    run_id, _ = hook.submit_run(body)
    run = weir.wait_state(run_id, {"succeeded", "failed"})
    assert run["state"] == "succeeded", run
    assert hook.task_log(run_id, "main.s.0") == b"out hi\n"
    assert hook.task_log(run_id, "main.s.0", stream="stderr") == b"oops\n"
    assert hook.task_log(run_id, "main.s.0", offset=4) == b"hi\n"


def test_a_bad_token_is_an_error_naming_the_code(weir):
    hook = hook_for(weir, token="weir_" + "0" * 64)
    try:
        hook.get_run(1)
    except WeirApiError as e:
        assert e.status == 401 and e.code == "unauthorized"
    else:
        raise AssertionError("a bad token was accepted")


def test_an_invalid_workflow_names_the_field(weir):
    hook = hook_for(weir)
    bad = workflow("hook-bad", "true")
    bad["jobs"][0]["stages"][0]["tasks"] = 0
    try:
        hook.submit_run(submit_body(workflow=bad, workflow_name=None, project=None, logical_date="x", params=None))
    except WeirApiError as e:
        assert e.status == 400
        assert "tasks" in (e.body.get("field") or "") + str(e)
    else:
        raise AssertionError("a stage with 0 tasks was accepted")


def cancel_after(trigger, seconds: float) -> None:
    async def run_then_cancel():
        task = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(seconds)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    asyncio.run(run_then_cancel())


def test_a_trigger_cancelled_while_its_task_is_still_deferred_leaves_the_run(weir):
    """A triggerer that stops (or hands the trigger to another) cancels it while the task
    instance stays deferred: the run must go on. Outside a triggerer the trigger cannot ask
    Airflow, and unknown counts as still deferred."""
    hook = hook_for(weir)
    run_id, _ = hook.submit_run(
        submit_body(workflow=workflow("hook-cancel", "sleep 30"), workflow_name=None, project=None, logical_date="c", params=None)
    )
    weir.wait_state(run_id, {"running"})
    trigger = WeirRunTrigger(run_id=run_id, poll_interval=0.2, dag_id="d", task_id="t", airflow_run_id="r")
    cancel_after(trigger, 1.0)
    assert hook.get_run(run_id)["state"] == "running"
    hook.kill_run(run_id)


class ClearedTrigger(WeirRunTrigger):
    """Stands in for Airflow's answer that the task instance is no longer deferred (cleared or
    marked): only a real triggerer can give that answer (RuntimeTaskInstance.get_task_states)."""

    async def _still_deferred(self) -> bool:
        return False


def test_a_trigger_cancelled_after_its_task_was_cleared_kills_the_run(weir):
    hook = hook_for(weir)
    run_id, _ = hook.submit_run(
        submit_body(workflow=workflow("hook-cleared", "sleep 30"), workflow_name=None, project=None, logical_date="c", params=None)
    )
    weir.wait_state(run_id, {"running"})
    cancel_after(ClearedTrigger(run_id=run_id, poll_interval=0.2), 1.0)
    assert weir.wait_state(run_id, {"killed", "failed", "succeeded"})["state"] == "killed"


def test_the_trigger_fires_once_with_the_final_state_and_the_failed_tasks(weir):
    hook = hook_for(weir)
    run_id, _ = hook.submit_run(
        submit_body(workflow=workflow("hook-trigger", "echo partial; printf tail; exit 7"), workflow_name=None, project=None, logical_date="t", params=None)
    )
    # the trigger resolves the connection (AIRFLOW_CONN_WEIR_DEFAULT, set by the fixture) itself:
    # the token never goes into Airflow's trigger table
    trigger = WeirRunTrigger(run_id=run_id, poll_interval=0.2)
    assert "password" not in str(trigger.serialize()) and weir.token not in str(trigger.serialize())

    async def collect():
        events = []
        async for e in trigger.run():
            events.append(e.payload)
        return events

    (event,) = asyncio.run(collect())
    assert event["run_id"] == run_id and event["state"] == "failed"
    assert event["failed_tasks"] == [{"task": "main.s.0", "state": "failed", "exit_code": 7, "attempts": 1}]


def test_the_log_follower_prints_whole_lines_and_restarts_with_a_new_attempt():
    f = LogFollower()
    run = {"jobs": [{"name": "j", "tasks": [{"stage": "s", "index": 0, "attempts": 1}]}]}
    reads = f.plan(run)
    assert reads[0] == ("j.s.0", "stdout", 0, "--- weir task j.s.0, attempt 1 ---")
    assert f.advance("j.s.0", "stdout", b"one\ntw") == ["[j.s.0 stdout] one"]
    assert f.plan(run)[0] == ("j.s.0", "stdout", 4, None)
    assert f.advance("j.s.0", "stdout", b"two", final=True) == ["[j.s.0 stdout] two"]
    run["jobs"][0]["tasks"][0]["attempts"] = 2
    assert f.plan(run)[0] == ("j.s.0", "stdout", 0, "--- weir task j.s.0, attempt 2 ---")
