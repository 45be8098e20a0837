"""Wait in Airflow's triggerer for a weir run to end, streaming its task logs.

The trigger polls ``GET /v1/runs/{id}`` every ``poll_interval`` seconds and logs every new line
of every task's output (in Airflow 3 a trigger's log lines go to the task instance's log). When
the run reaches a final state it fires one event ``{run_id, state, reason, failed_tasks}``.

When the trigger is cancelled it asks Airflow whether its task instance is still deferred: a
triggerer that stops or hands the trigger to another triggerer leaves it deferred, and the run
must go on; a task that was cleared, marked or killed is not deferred any more, and then (with
``kill_on_cancel``) the weir run is killed.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, AsyncIterator

import httpx
from airflow.triggers.base import BaseTrigger, TriggerEvent

from weir_provider.hooks.weir import FINAL_STATES, LogFollower, WeirApiError, WeirHook

#: Consecutive failed polls (the server unreachable or answering 5xx) before the trigger gives up.
MAX_POLL_FAILURES = 60


def failed_tasks(run: dict) -> list[dict[str, Any]]:
    """The tasks that ended badly, for the event and the operator's message."""
    out = []
    for job in run.get("jobs", []):
        for t in job.get("tasks", []):
            if t.get("state") in ("failed", "killed"):
                out.append(
                    {
                        "task": f"{job['name']}.{t['stage']}.{t['index']}",
                        "state": t["state"],
                        "exit_code": t.get("exit_code"),
                        "attempts": t.get("attempts"),
                    }
                )
    return out


class WeirRunTrigger(BaseTrigger):
    """Fires once when weir run ``run_id`` has ended; see the module's documentation."""

    def __init__(
        self,
        run_id: int,
        weir_conn_id: str = WeirHook.default_conn_name,
        poll_interval: float = 5.0,
        stream_logs: bool = True,
        kill_on_cancel: bool = True,
        dag_id: str | None = None,
        task_id: str | None = None,
        airflow_run_id: str | None = None,
        map_index: int = -1,
    ):
        super().__init__()
        self.run_id = int(run_id)
        self.weir_conn_id = weir_conn_id
        self.poll_interval = float(poll_interval)
        self.stream_logs = stream_logs
        self.kill_on_cancel = kill_on_cancel
        self.dag_id = dag_id
        self.task_id = task_id
        self.airflow_run_id = airflow_run_id
        self.map_index = map_index

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "weir_provider.triggers.weir.WeirRunTrigger",
            {
                "run_id": self.run_id,
                "weir_conn_id": self.weir_conn_id,
                "poll_interval": self.poll_interval,
                "stream_logs": self.stream_logs,
                "kill_on_cancel": self.kill_on_cancel,
                "dag_id": self.dag_id,
                "task_id": self.task_id,
                "airflow_run_id": self.airflow_run_id,
                "map_index": self.map_index,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = WeirHook(self.weir_conn_id)
        follower = LogFollower()
        failures = 0
        try:
            while True:
                try:
                    run = await hook.aget_run(self.run_id)
                    failures = 0
                except (httpx.TransportError, WeirApiError) as e:
                    if isinstance(e, WeirApiError) and e.status < 500:
                        # 401/403/404: the token or the run is gone; waiting will not help
                        yield TriggerEvent({"run_id": self.run_id, "state": "error", "reason": str(e)})
                        return
                    failures += 1
                    if failures >= MAX_POLL_FAILURES:
                        yield TriggerEvent(
                            {
                                "run_id": self.run_id,
                                "state": "error",
                                "reason": f"weir did not answer {failures} polls in a row: {e}",
                            }
                        )
                        return
                    self.log.warning("polling weir run %s failed (%s); trying again", self.run_id, e)
                    await asyncio.sleep(self.poll_interval * (1 + random.random()))
                    continue
                final = run.get("state") in FINAL_STATES
                if self.stream_logs:
                    await self._stream(hook, follower, run, final)
                if final:
                    yield TriggerEvent(
                        {
                            "run_id": self.run_id,
                            "state": run["state"],
                            "reason": run.get("reason"),
                            "failed_tasks": failed_tasks(run),
                        }
                    )
                    return
                await asyncio.sleep(self.poll_interval)
        except asyncio.CancelledError:
            if self.kill_on_cancel and not await self._still_deferred():
                self.log.info("task instance is no longer deferred: killing weir run %s", self.run_id)
                try:
                    await asyncio.shield(hook.akill_run(self.run_id))
                except Exception as e:  # noqa: BLE001 -- the cancellation must go on
                    self.log.error("killing weir run %s failed: %s", self.run_id, e)
            raise

    async def _stream(self, hook: WeirHook, follower: LogFollower, run: dict, final: bool) -> None:
        for task, stream, offset, header in follower.plan(run):
            if header:
                self.log.info("%s", header)
            try:
                data = await hook.atask_log(self.run_id, task, stream=stream, offset=offset)
            except (httpx.TransportError, WeirApiError) as e:
                self.log.warning("reading the log of %s (%s) failed: %s", task, stream, e)
                continue
            for line in follower.advance(task, stream, data, final=final):
                self.log.info("%s", line)

    async def _still_deferred(self) -> bool:
        """Whether Airflow still has the task instance deferred. Unknown counts as deferred (the
        run is left alone rather than killed by mistake)."""
        if not (self.dag_id and self.task_id and self.airflow_run_id):
            return True
        try:
            from asgiref.sync import sync_to_async
            from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

            states = await sync_to_async(RuntimeTaskInstance.get_task_states)(
                dag_id=self.dag_id, task_ids=[self.task_id], run_ids=[self.airflow_run_id]
            )
        except Exception as e:  # noqa: BLE001 -- not inside a triggerer, or it cannot answer
            self.log.warning("cannot tell whether the task is still deferred (%s): leaving the run", e)
            return True
        key = self.task_id if self.map_index < 0 else f"{self.task_id}_{self.map_index}"
        state = (states.get(self.airflow_run_id) or {}).get(key)
        return state in (None, "deferred")
