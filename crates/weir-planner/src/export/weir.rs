//! weir's own cluster file: the file as written, with whatever the caller changed (a plan's
//! weights and `max_running_apps`). Settings the user left to tier defaults stay that way.

use weir_model::ClusterConfig;

use crate::error::PlanError;

pub(super) fn export(cfg: &ClusterConfig) -> Result<String, PlanError> {
    let yaml = serde_saphyr::to_string(&cfg.file).map_err(|e| PlanError::Write {
        format: "weir",
        what: "cluster.yaml".into(),
        message: e.to_string(),
    })?;
    Ok(format!("# weir cluster file, written by weir. Check it with: weir validate cluster.yaml\n{yaml}"))
}
