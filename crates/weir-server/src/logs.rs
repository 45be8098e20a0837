//! `GET /v1/runs/{id}/tasks/{task}/logs`: an attempt's stdout or stderr file, whole, or
//! followed (`follow=true`) until the attempt has ended and the file is read to its end.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use weir_api::Role;
use weir_store::{AttemptRow, JobStore};

use crate::error::ApiError;
use crate::state::{readable_run, AppState};

#[derive(Deserialize)]
pub struct LogQuery {
    attempt: Option<u32>,
    stream: Option<String>,
    follow: Option<bool>,
}

pub async fn task_logs(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((id, task)): Path<(i64, String)>,
    Query(q): Query<LogQuery>,
) -> Result<Response, ApiError> {
    readable_run(&s, &headers, id, Role::Viewer).await?;
    let jobs = s.store.jobs(id).await?;
    let tasks = s.store.tasks(id).await?;
    let parts: Vec<&str> = task.split('.').collect();
    let (job_name, stage, index) = match parts.as_slice() {
        [j, st, i] => (Some(*j), *st, *i),
        [st, i] => (None, *st, *i),
        _ => {
            return Err(
                ApiError::bad_request(format!("`{task}` is not a task: write job.stage.index")).field("task")
            )
        }
    };
    let index: u32 = index
        .parse()
        .map_err(|_| ApiError::bad_request(format!("`{index}` is not a task index")).field("task"))?;
    let job = match job_name {
        Some(n) => jobs.iter().find(|j| j.name == n),
        None if jobs.len() == 1 => jobs.first(),
        None => {
            return Err(
                ApiError::bad_request("this run has several jobs: write job.stage.index").field("task")
            )
        }
    }
    .ok_or_else(|| ApiError::not_found(format!("run {id} has no task {task}")))?;
    let t = tasks
        .iter()
        .find(|t| t.job_idx == job.idx && t.stage == stage && t.task_idx == index)
        .ok_or_else(|| ApiError::not_found(format!("run {id} has no task {task}")))?;
    let attempts = s.store.attempts(id, t.job_idx, t.stage_idx, t.task_idx).await?;
    let attempt = match q.attempt {
        Some(n) => attempts.iter().find(|a| a.attempt == n),
        None => attempts.last(),
    }
    .cloned()
    .ok_or_else(|| ApiError::not_found(format!("task {task} of run {id} has no such attempt yet")))?;
    let path = match q.stream.as_deref().unwrap_or("stdout") {
        "stdout" => attempt.stdout.clone(),
        "stderr" => attempt.stderr.clone(),
        other => {
            return Err(ApiError::bad_request(format!("stream `{other}` is neither stdout nor stderr"))
                .field("stream"))
        }
    };
    let headers = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
    if !q.follow.unwrap_or(false) {
        let bytes = match tokio::fs::read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(ApiError::internal(format!("cannot read {path}: {e}"))),
        };
        return Ok((headers, bytes).into_response());
    }
    let stream = follow(s.store.clone(), attempt, path);
    Ok((headers, Body::from_stream(stream)).into_response())
}

struct Tail {
    store: Arc<dyn JobStore>,
    attempt: AttemptRow,
    path: String,
    offset: u64,
    ended: bool,
    done: bool,
}

/// Chunks of the file as it grows; ends once the attempt has ended and nothing is left.
fn follow(
    store: Arc<dyn JobStore>,
    attempt: AttemptRow,
    path: String,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    let tail = Tail { store, attempt, path, offset: 0, ended: false, done: false };
    futures_util::stream::unfold(tail, |mut t| async move {
        loop {
            if t.done {
                return None;
            }
            let chunk = read_from(&t.path, t.offset).await;
            match chunk {
                Ok(bytes) if !bytes.is_empty() => {
                    t.offset += bytes.len() as u64;
                    return Some((Ok(bytes), t));
                }
                Ok(_) => {}
                Err(e) => {
                    t.done = true;
                    return Some((Err(e), t));
                }
            }
            if t.ended {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let a = &t.attempt;
            match t.store.attempts(a.run_id, a.job_idx, a.stage_idx, a.task_idx).await {
                Ok(all) => {
                    // One more read after the end is seen, for what was written last.
                    t.ended =
                        all.iter().find(|x| x.attempt == a.attempt).is_none_or(|x| x.ended_ms.is_some());
                }
                Err(_) => t.ended = true,
            }
        }
    })
}

async fn read_from(path: &str, offset: u64) -> Result<Vec<u8>, std::io::Error> {
    let mut f = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    f.seek(std::io::SeekFrom::Start(offset)).await?;
    let mut buf = Vec::with_capacity(64 * 1024);
    (&mut f).take(1 << 20).read_to_end(&mut buf).await?;
    Ok(buf)
}
