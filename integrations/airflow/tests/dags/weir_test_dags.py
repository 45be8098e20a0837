"""The DAGs the operator's tests run (Airflow 3's `dag.test()` runs DAGs of its dags folder,
which the tests point here). `python weir_test_dags.py DAG_ID LOGICAL_DATE` runs one."""

from __future__ import annotations

import datetime as dt
import sys

from airflow.sdk import DAG

from weir_provider.operators.weir import WeirRunOperator

START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def workflow(name: str, command: str, max_attempts: int = 1) -> dict:
    """An inline one-task workflow in root.default (project `default`)."""
    return {
        "name": name,
        "queue": "root.default",
        "jobs": [
            {
                "name": "main",
                "stages": [
                    {
                        "name": "s",
                        "tasks": 1,
                        "resources": {"cpu": 100, "memory": "64m"},
                        "command": command,
                        "max_attempts": max_attempts,
                    }
                ],
            }
        ],
    }


def one_task_dag(dag_id: str, **op_kwargs) -> DAG:
    with DAG(dag_id, schedule=None, start_date=START, catchup=False) as dag:
        WeirRunOperator(task_id="run", poll_interval=0.3, **op_kwargs)
    return dag


dags = [
    one_task_dag("weir_ok_deferred", workflow=workflow("af-ok-deferred", "echo from-weir; echo to-stderr >&2")),
    one_task_dag("weir_ok_worker", workflow=workflow("af-ok-worker", "echo from-weir; printf no-newline"), deferrable=False),
    one_task_dag("weir_fail", workflow=workflow("af-fail", "echo about to fail; exit 3")),
    one_task_dag("weir_retry", workflow=workflow("af-retry", "sleep 15")),
    one_task_dag("weir_stop", workflow=workflow("af-stop", "sleep 300"), deferrable=False),
    one_task_dag("weir_clear", workflow=workflow("af-clear", "sleep 300")),
    one_task_dag("weir_reattach", workflow=workflow("af-reattach", "sleep 3"), reattach_on_restart=True),
    one_task_dag("weir_restart", workflow=workflow("af-restart", "sleep 3")),
]
for d in dags:
    globals()[d.dag_id] = d

if __name__ == "__main__":
    dag_id, logical = sys.argv[1], dt.datetime.fromisoformat(sys.argv[2])
    globals()[dag_id].test(logical_date=logical)
