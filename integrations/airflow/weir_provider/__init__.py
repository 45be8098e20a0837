"""Apache Airflow provider for weir.

``WeirRunOperator`` submits a run of a weir workflow for the Airflow task's logical date, waits for
its final state in the triggerer (deferrable: no worker slot is held while weir runs it), streams
the run's task logs into the Airflow task log and kills the run when the Airflow task is cleared or
killed. ``WeirHook`` is the client of weir's HTTP API, with the token from an Airflow connection.
"""

__version__ = "0.1.0"


def get_provider_info():
    """What Airflow's provider manager lists for this package."""
    return {
        "package-name": "airflow-provider-weir",
        "name": "weir",
        "description": "Run workflows on weir's submission service from Airflow.",
        "versions": [__version__],
        "connection-types": [
            {"connection-type": "weir", "hook-class-name": "weir_provider.hooks.weir.WeirHook"},
        ],
    }
