//! `GET /v1/runs/{id}/tasks/{task}/logs`: an attempt's stdout or stderr file, or a byte range
//! of it (`offset`/`length`, or the last `tail` bytes), streamed from disk in chunks — a 1 GiB
//! log costs the server one 64 KiB buffer per reader, never the file — or followed
//! (`follow=true`) from that point until the attempt has ended and the file is read to its end.

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
    offset: Option<u64>,
    length: Option<u64>,
    tail: Option<u64>,
}

/// Bytes read per chunk.
const CHUNK: usize = 64 * 1024;

/// Where a read starts and how much it may return, given the file's size now.
pub(crate) fn range(
    size: u64,
    offset: Option<u64>,
    length: Option<u64>,
    tail: Option<u64>,
) -> (u64, Option<u64>) {
    let start = match tail {
        Some(t) => size.saturating_sub(t),
        None => offset.unwrap_or(0).min(size),
    };
    (start, length)
}

pub async fn task_logs(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((id, task)): Path<(i64, String)>,
    Query(q): Query<LogQuery>,
) -> Result<Response, ApiError> {
    if q.tail.is_some() && q.offset.is_some() {
        return Err(ApiError::bad_request("give `offset` or `tail`, not both").field("tail"));
    }
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
    let size = match tokio::fs::metadata(&path).await {
        Ok(m) => m.len(),
        // A backend that runs tasks on other machines (Slurm) has its nodes write the file on a
        // shared path: an ended attempt without it means this server cannot see that path.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && runs_elsewhere(&attempt) && ended(&attempt) => {
            return Err(ApiError::not_found(format!(
                "the log file {path} is not on this server: the compute node wrote it elsewhere, or the cluster's \
                 backend shared_dir is not the same path here and on the nodes"
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(ApiError::internal(format!("cannot read {path}: {e}"))),
    };
    let (start, length) = range(size, q.offset, q.length, q.tail);
    let headers = [
        (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_string()),
        (header::HeaderName::from_static("x-log-size"), size.to_string()),
        (header::HeaderName::from_static("x-log-offset"), start.to_string()),
    ];
    let follow_it = q.follow.unwrap_or(false);
    let tail = Tail {
        store: s.store.clone(),
        attempt,
        path,
        offset: start,
        left: length,
        follow: follow_it,
        ended: !follow_it,
        done: false,
    };
    Ok((headers, Body::from_stream(chunks(tail))).into_response())
}

/// Whether the attempt ran on a backend whose tasks write their logs on other machines.
fn runs_elsewhere(a: &AttemptRow) -> bool {
    a.launched.as_deref().is_some_and(|l| l.contains("\"backend\":\"slurm\""))
}

fn ended(a: &AttemptRow) -> bool {
    matches!(a.state.as_str(), "succeeded" | "failed" | "killed" | "lost")
}

struct Tail {
    store: Arc<dyn JobStore>,
    attempt: AttemptRow,
    path: String,
    offset: u64,
    /// Bytes still to send, when a length was asked for.
    left: Option<u64>,
    /// Wait for more until the attempt has ended.
    follow: bool,
    ended: bool,
    done: bool,
}

/// Chunks of the file from `offset`: to its end (or `left` bytes); when following, as it grows,
/// until the attempt has ended and nothing is left.
fn chunks(tail: Tail) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::unfold(tail, |mut t| async move {
        loop {
            if t.done || t.left == Some(0) {
                return None;
            }
            let want = t.left.map_or(CHUNK, |l| l.min(CHUNK as u64) as usize);
            match read_from(&t.path, t.offset, want).await {
                Ok(bytes) if !bytes.is_empty() => {
                    t.offset += bytes.len() as u64;
                    t.left = t.left.map(|l| l.saturating_sub(bytes.len() as u64));
                    return Some((Ok(bytes), t));
                }
                Ok(_) => {}
                Err(e) => {
                    t.done = true;
                    return Some((Err(e), t));
                }
            }
            if t.ended || !t.follow {
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

async fn read_from(path: &str, offset: u64, want: usize) -> Result<Vec<u8>, std::io::Error> {
    let mut f = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    f.seek(std::io::SeekFrom::Start(offset)).await?;
    let mut buf = Vec::with_capacity(want);
    (&mut f).take(want as u64).read_to_end(&mut buf).await?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::range;

    #[test]
    fn ranges_of_a_log() {
        assert_eq!(range(100, None, None, None), (0, None));
        assert_eq!(range(100, Some(40), Some(10), None), (40, Some(10)));
        assert_eq!(range(100, Some(400), None, None), (100, None));
        assert_eq!(range(100, None, None, Some(30)), (70, None));
        assert_eq!(range(100, None, None, Some(300)), (0, None));
        assert_eq!(range(100, None, Some(5), Some(30)), (70, Some(5)));
    }
}
