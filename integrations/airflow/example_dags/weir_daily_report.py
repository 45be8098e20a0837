"""An example DAG: a daily report run on weir, then a second run that uses the first's id.

Set the connection first, e.g.
    export AIRFLOW_CONN_WEIR_DEFAULT='{"conn_type": "weir", "host": "127.0.0.1", "port": 8470,
                                       "password": "weir_..."}'
(a token with a `submitter` grant on the workflows' project: `weir token create ...`).
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from weir_provider.operators.weir import WeirRunOperator

with DAG(
    "weir_daily_report",
    schedule="@daily",
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc),
    catchup=False,
) as dag:
    # A workflow registered on the server (`PUT /v1/workflows/revenue-report`): weir's routes
    # and queues decide where and when it runs; its logical date is this task's.
    report = WeirRunOperator(task_id="revenue_report", workflow_name="revenue-report")

    # An inline workflow; the previous run's id reaches its tasks as WEIR_PARAM_REPORT_RUN.
    publish = WeirRunOperator(
        task_id="publish",
        workflow={
            "name": "publish-report",
            "project": "analytics",
            "tier": 2,
            "jobs": [
                {
                    "name": "publish",
                    "stages": [
                        {
                            "name": "upload",
                            "tasks": 1,
                            "resources": {"cpu": 500, "memory": "256m"},
                            "command": 'echo "publishing report run $WEIR_PARAM_REPORT_RUN for $WEIR_LOGICAL_DATE"',
                        }
                    ],
                }
            ],
        },
        run_params={"REPORT_RUN": "{{ ti.xcom_pull(task_ids='revenue_report') }}"},
    )
    report >> publish
