//! The Airflow provider (integrations/airflow: `WeirRunOperator`, its trigger and hook) in real
//! Airflow 3 DAG runs against this build's `weir serve`: its pytest suite, run with the Python
//! named by `WEIR_AIRFLOW_PYTHON` (a virtualenv with `apache-airflow` and `pytest`; `.ci/run`
//! makes one and caches it).
//!
//! `.ci/run` sets `WEIR_REQUIRE_AIRFLOW=1`, which turns a missing Airflow into a failure;
//! elsewhere the test says loudly that it skipped.

use std::path::Path;
use std::process::Command;

#[test]
fn the_airflow_provider_against_a_real_weir_serve() {
    let python = std::env::var("WEIR_AIRFLOW_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_airflow = Command::new(&python)
        .args(["-c", "import airflow.sdk, pytest, httpx"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has_airflow {
        assert!(
            std::env::var_os("WEIR_REQUIRE_AIRFLOW").is_none(),
            "WEIR_REQUIRE_AIRFLOW is set but {python} cannot import airflow.sdk, pytest and httpx"
        );
        eprintln!(
            "\n*** SKIPPED the Airflow provider's tests: set WEIR_AIRFLOW_PYTHON to a Python with \
             apache-airflow 3 and pytest (.ci/run makes one) ***\n"
        );
        return;
    }
    let provider = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/airflow");
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(&provider)
        .env("WEIR_BIN", env!("CARGO_BIN_EXE_weir"))
        .env("PYTHONPATH", &provider)
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Airflow provider's tests failed:\n{}\n{}",
        tail(&stdout, 12_000),
        tail(&stderr, 4_000)
    );
    // the summary line, so a run that collected nothing cannot pass
    let summary = stdout.lines().rev().find(|l| l.contains(" passed")).unwrap_or("");
    assert!(summary.contains(" passed") && !summary.contains("skipped"), "pytest: {summary}");
}

fn tail(s: &str, n: usize) -> &str {
    let start = s.len().saturating_sub(n);
    let start = (start..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(s.len());
    &s[start..]
}
