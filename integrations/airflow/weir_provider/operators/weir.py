"""``WeirRunOperator``: one weir run per Airflow task instance.

The run's logical date is the Airflow task's (its ISO form; a run without one uses the Airflow
run id). weir keeps one active run per (workflow, logical date), so a submission that finds one
gets its id (409) instead of starting a second run. What the operator does with it:

- a run another submitter started (another DAG, a person, a backfill): wait for it;
- a run an earlier try of this same task instance started (its params carry
  ``AIRFLOW_TASK_INSTANCE`` and ``AIRFLOW_TRY``): the earlier try was cleared, or its worker
  died. By default the run is killed and a new one submitted once it has ended — clearing a task
  restarts its work; ``reattach_on_restart=True`` waits for it instead (a worker that died does
  not lose the run's progress; clearing then does not restart it).

Final states: ``succeeded`` is success (the weir run id is the task's return value, so the next
task can pull it); ``failed`` fails the task (Airflow's retries apply: the next try submits a new
run, since the failed one is no longer active); ``killed`` fails it without retries (someone
stopped the run on purpose).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.exceptions import AirflowException, AirflowFailException
from airflow.sdk import BaseOperator

from weir_provider.hooks.weir import FINAL_STATES, LogFollower, WeirApiError, WeirHook, submit_body
from weir_provider.triggers.weir import WeirRunTrigger, failed_tasks


def default_logical_date(context) -> str:
    """The weir logical date of an Airflow task: its logical date in ISO form, else its run id."""
    ld = context.get("logical_date")
    if ld is not None:
        return ld.isoformat()
    return str(context["run_id"])


class WeirRunOperator(BaseOperator):
    """Submit a weir run and wait for it to end.

    :param workflow: an inline workflow (the workload file's schema, stages with a ``command``);
        or ``workflow_name``: a workflow registered with ``PUT /v1/workflows/{name}``.
    :param project: with ``workflow_name``, the project that registered it (when ambiguous).
    :param run_params: handed to every task as ``WEIR_PARAM_<NAME>``. Templated.
    :param logical_date: the run's logical date label. Templated. Default: the Airflow task's
        logical date (ISO), else its run id.
    :param weir_conn_id: the Airflow connection with weir's address and token.
    :param deferrable: wait in the triggerer (default), holding no worker slot; False waits in
        the worker.
    :param poll_interval: seconds between polls of the run's state.
    :param stream_logs: copy the run's task output into the Airflow task log.
    :param kill_on_stop: kill the weir run when the Airflow task is cleared, marked or killed.
    :param reattach_on_restart: a new try that finds the run an earlier try started waits for it
        instead of killing it and starting again (see the module's documentation).
    """

    template_fields: Sequence[str] = ("workflow", "workflow_name", "project", "run_params", "logical_date")
    ui_color = "#e8f1f8"

    def __init__(
        self,
        *,
        workflow: dict | None = None,
        workflow_name: str | None = None,
        project: str | None = None,
        run_params: dict[str, Any] | None = None,
        logical_date: str | None = None,
        weir_conn_id: str = WeirHook.default_conn_name,
        deferrable: bool = True,
        poll_interval: float = 5.0,
        stream_logs: bool = True,
        kill_on_stop: bool = True,
        reattach_on_restart: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if (workflow is None) == (workflow_name is None):
            raise ValueError(f"{self.task_id}: give exactly one of `workflow` or `workflow_name`")
        self.workflow = workflow
        self.workflow_name = workflow_name
        self.project = project
        self.run_params = run_params
        self.logical_date = logical_date
        self.weir_conn_id = weir_conn_id
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.stream_logs = stream_logs
        self.kill_on_stop = kill_on_stop
        self.reattach_on_restart = reattach_on_restart
        self.weir_run_id: int | None = None

    def execute(self, context) -> int | None:
        hook = WeirHook(self.weir_conn_id)
        label = self.logical_date or default_logical_date(context)
        ti = context["ti"]
        instance = f"{ti.dag_id}/{ti.task_id}/{ti.run_id}/{ti.map_index}"
        params = dict(self.run_params or {})
        params.update({"AIRFLOW_TASK_INSTANCE": instance, "AIRFLOW_TRY": str(ti.try_number)})
        body = submit_body(
            workflow=self.workflow,
            workflow_name=self.workflow_name,
            project=self.project,
            logical_date=label,
            params=params,
        )
        # One key per try: a lost answer to this try's submission replays the same run, while the
        # next try submits again (and finds the active run through weir's uniqueness).
        key = f"airflow/{instance}/{ti.try_number}"
        run_id, created = hook.submit_run(body, idempotency_key=key)
        if not created:
            active = hook.get_run(run_id)
            started_by = (active.get("params") or {}).get("AIRFLOW_TASK_INSTANCE")
            earlier_try = (active.get("params") or {}).get("AIRFLOW_TRY")
            if started_by == instance and earlier_try != str(ti.try_number) and not self.reattach_on_restart:
                self.log.info(
                    "weir run %s was started by try %s of this task: killing it to start again", run_id, earlier_try
                )
                self._kill_and_wait(hook, run_id)
                run_id, created = hook.submit_run(body, idempotency_key=f"{key}/again")
        self.weir_run_id = run_id
        if created:
            self.log.info("submitted weir run %s (logical date %s)", run_id, label)
        else:
            self.log.info("weir run %s is already active for logical date %s: waiting for it", run_id, label)
        ti.xcom_push(key="weir_run_id", value=run_id)

        if self.deferrable:
            self.defer(
                trigger=WeirRunTrigger(
                    run_id=run_id,
                    weir_conn_id=self.weir_conn_id,
                    poll_interval=self.poll_interval,
                    stream_logs=self.stream_logs,
                    kill_on_cancel=self.kill_on_stop,
                    dag_id=ti.dag_id,
                    task_id=ti.task_id,
                    airflow_run_id=ti.run_id,
                    map_index=ti.map_index,
                ),
                method_name="execute_complete",
            )
        return self._wait(hook, run_id)

    def execute_complete(self, context, event: dict[str, Any]) -> int:
        """Back from the triggerer: the run's final state decides the task's."""
        return self._finish(event)

    def _wait(self, hook: WeirHook, run_id: int) -> int:
        follower = LogFollower()
        while True:
            run = hook.get_run(run_id)
            final = run["state"] in FINAL_STATES
            if self.stream_logs:
                for task, stream, offset, header in follower.plan(run):
                    if header:
                        self.log.info("%s", header)
                    for line in follower.advance(task, stream, hook.task_log(run_id, task, stream=stream, offset=offset), final=final):
                        self.log.info("%s", line)
            if final:
                return self._finish(
                    {"run_id": run_id, "state": run["state"], "reason": run.get("reason"), "failed_tasks": failed_tasks(run)}
                )
            time.sleep(self.poll_interval)

    def _kill_and_wait(self, hook: WeirHook, run_id: int) -> None:
        try:
            hook.kill_run(run_id)
        except WeirApiError as e:
            self.log.info("killing weir run %s: %s", run_id, e)
        while hook.get_run(run_id)["state"] not in FINAL_STATES:
            time.sleep(self.poll_interval)

    def _finish(self, event: dict[str, Any]) -> int:
        run_id, state = event["run_id"], event["state"]
        if state == "succeeded":
            self.log.info("weir run %s succeeded", run_id)
            return run_id
        detail = f"weir run {run_id} {state}"
        if event.get("reason"):
            detail += f": {event['reason']}"
        bad = event.get("failed_tasks") or []
        if bad:
            detail += "; tasks: " + ", ".join(
                f"{t['task']} {t['state']} (exit {t.get('exit_code')}, {t.get('attempts')} attempts)" for t in bad[:10]
            )
        if state == "killed":
            raise AirflowFailException(detail)
        raise AirflowException(detail)

    def on_kill(self) -> None:
        """The Airflow task was cleared, marked or killed while it waited in the worker."""
        if self.kill_on_stop and self.weir_run_id is not None:
            self.log.info("killing weir run %s", self.weir_run_id)
            WeirHook(self.weir_conn_id).kill_run(self.weir_run_id)
