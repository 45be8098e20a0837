//! The `spark-submit` command line of one attempt, as a `/bin/sh` command the local backend
//! runs in the attempt's own process group.

use std::collections::BTreeMap;

use weir_backend::TaskLaunch;
use weir_model::SparkSpec;

use crate::install::Install;

/// `exec spark-submit --master MASTER --name weir:ATTEMPT [--class C] --conf K=V … FILE ARGS…`,
/// each word quoted for the shell. `exec`: the wrapper's subshell becomes spark-submit (then
/// the JVM), so no extra shell sits between the group's leader and the driver.
///
/// The backend's `conf` comes first and the stage's after it: spark-submit keeps the last
/// `--conf` of a key (SparkSubmitArguments.handle puts each into a map), so the stage wins.
pub fn command(
    install: &Install,
    master: &str,
    defaults: &BTreeMap<String, String>,
    launch: &TaskLaunch,
    app: &SparkSpec,
) -> String {
    let mut words: Vec<String> = vec![install.submit().display().to_string()];
    let mut push = |a: &str, b: &str| {
        words.push(a.to_string());
        words.push(b.to_string());
    };
    push("--master", master);
    push("--name", &format!("weir:{}", launch.attempt));
    let main = app.main.trim();
    let python = main.ends_with(".py");
    if !python {
        push("--class", main);
    }
    for (k, v) in defaults.iter().chain(app.conf.iter()) {
        push("--conf", &format!("{k}={v}"));
    }
    words.push(if python { main.to_string() } else { app.jar.clone().unwrap_or_default() });
    words.extend(app.args.iter().cloned());
    let mut line = String::from("exec");
    for w in &words {
        line.push(' ');
        line.push_str(&quote(w));
    }
    line
}

/// `local[N]`: the application's executors when it says, else the task's CPUs (at least 1).
pub fn local_master(launch: &TaskLaunch, app: &SparkSpec) -> String {
    let threads = app.executors.map(u64::from).unwrap_or_else(|| launch.resources.cpu.div_ceil(1000)).max(1);
    format!("local[{threads}]")
}

/// The variables spark-submit and a PySpark driver need, unless the stage sets them.
pub fn env(install: &Install, launch: &TaskLaunch) -> BTreeMap<String, String> {
    let mut env = launch.env.clone();
    env.entry("SPARK_HOME".into()).or_insert_with(|| install.home.display().to_string());
    if let Some(py) = &install.python {
        let py = py.display().to_string();
        env.entry("PYSPARK_PYTHON".into()).or_insert_with(|| py.clone());
        env.entry("PYSPARK_DRIVER_PYTHON".into()).or_insert(py);
    }
    env
}

/// One word for `/bin/sh`: single-quoted, a `'` written as `'\''`.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use weir_backend::AttemptId;

    fn launch(cpu: u64) -> TaskLaunch {
        TaskLaunch {
            attempt: AttemptId::new("run-1/0/0/0/1").unwrap(),
            command: String::new(),
            env: BTreeMap::new(),
            workdir: "/w/run-1".into(),
            resources: weir_model::Resources { cpu, ..Default::default() },
            user: None,
            stdout: "/l/o".into(),
            stderr: "/l/e".into(),
            spark: None,
        }
    }

    #[test]
    fn the_command_line_quotes_every_word_and_the_stage_conf_comes_last() {
        let install = Install { home: PathBuf::from("/opt/spark"), python: None, version: String::new() };
        let app = SparkSpec {
            main: "wc.py".into(),
            jar: None,
            args: vec!["it's here.txt".into()],
            conf: BTreeMap::from([("spark.ui.enabled".into(), "true".into())]),
            executors: None,
        };
        let defaults = BTreeMap::from([("spark.ui.enabled".into(), "false".into())]);
        let l = launch(2500);
        let master = local_master(&l, &app);
        assert_eq!(master, "local[3]");
        assert_eq!(
            command(&install, &master, &defaults, &l, &app),
            "exec '/opt/spark/bin/spark-submit' '--master' 'local[3]' '--name' 'weir:run-1/0/0/0/1' \
             '--conf' 'spark.ui.enabled=false' '--conf' 'spark.ui.enabled=true' 'wc.py' 'it'\\''s here.txt'"
        );
        let jvm = SparkSpec {
            main: "org.example.Main".into(),
            jar: Some("app.jar".into()),
            executors: Some(4),
            ..app
        };
        let line = command(&install, &local_master(&l, &jvm), &BTreeMap::new(), &l, &jvm);
        assert!(
            line.contains("'local[4]' '--name' 'weir:run-1/0/0/0/1' '--class' 'org.example.Main'"),
            "{line}"
        );
        assert!(line.contains("'spark.ui.enabled=true' 'app.jar' 'it'"), "{line}");
    }
}
