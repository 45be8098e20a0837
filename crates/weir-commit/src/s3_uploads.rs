//! ListMultipartUploads, which object_store does not offer: the request is signed with
//! object_store's public `AwsAuthorizer` (SigV4), sent with reqwest, and its XML answer read
//! page by page (`key-marker`, `upload-id-marker`).

use http::Method;
use object_store::aws::{AwsAuthorizer, AwsCredential};
use object_store::client::{HttpRequest, HttpRequestBody};
use quick_xml::events::Event;
use quick_xml::Reader;

use crate::config::S3Config;
use crate::error::{CommitError, Result};
use crate::metrics::StoreMetrics;
use crate::store::UploadListing;

/// AWS's URI encoding: unreserved characters as they are, every other byte `%XX`.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

struct Page {
    uploads: Vec<UploadListing>,
    next: Option<(String, String)>,
}

pub(crate) async fn list(
    http: &reqwest::Client,
    config: &S3Config,
    prefix: &str,
    metrics: &StoreMetrics,
) -> Result<Vec<UploadListing>> {
    let fail = |reason: String| CommitError::ListUploads { prefix: prefix.to_string(), reason };
    let base = match &config.endpoint {
        Some(e) => format!("{}/{}", e.trim_end_matches('/'), config.bucket),
        None => format!("https://{}.s3.{}.amazonaws.com", config.bucket, config.region),
    };
    let credential = AwsCredential {
        key_id: config.credentials.access_key_id.clone(),
        secret_key: config.credentials.secret_access_key.clone(),
        token: config.credentials.session_token.clone(),
    };
    let mut out = Vec::new();
    let mut marker: Option<(String, String)> = None;
    loop {
        // The authorizer sorts the parameters for the signature itself.
        let mut query = format!("uploads=&prefix={}", encode(prefix));
        if let Some((key, id)) = &marker {
            query.push_str(&format!("&key-marker={}&upload-id-marker={}", encode(key), encode(id)));
        }
        let url = format!("{base}?{query}");
        let mut request: HttpRequest = http::Request::builder()
            .method(Method::GET)
            .uri(&url)
            .body(HttpRequestBody::empty())
            .map_err(|e| fail(format!("request {url}: {e}")))?;
        AwsAuthorizer::new(&credential, "s3", &config.region)
            .try_authorize(&mut request, None)
            .map_err(|e| fail(format!("sign the request: {e}")))?;
        let mut tries = 0usize;
        let body = loop {
            let sent = http.get(&url).headers(request.headers().clone()).send().await;
            let retry = match sent {
                Ok(resp) => {
                    let status = resp.status();
                    metrics.on_response(status.as_u16());
                    let text = resp.text().await.map_err(|e| fail(format!("read the answer: {e}")))?;
                    if status.is_success() {
                        break text;
                    }
                    if !(status.is_server_error() || status.as_u16() == 429) {
                        return Err(fail(format!("HTTP {status}: {text}")));
                    }
                    format!("HTTP {status}: {text}")
                }
                Err(e) => {
                    if e.is_timeout() {
                        metrics.on_transport_error(object_store::client::HttpErrorKind::Timeout);
                    } else {
                        metrics.on_transport_error(object_store::client::HttpErrorKind::Connect);
                    }
                    e.to_string()
                }
            };
            tries += 1;
            if tries > config.retry.max_retries {
                return Err(fail(format!("{retry} (after {} retries)", tries - 1)));
            }
            tokio::time::sleep(crate::backoff::delay(&config.retry, tries)).await;
        };
        let page = parse(&body).map_err(|e| fail(format!("unreadable answer: {e}")))?;
        out.extend(page.uploads);
        match page.next {
            Some(next) if Some(&next) != marker.as_ref() => marker = Some(next),
            _ => break,
        }
    }
    Ok(out)
}

fn parse(xml: &str) -> Result<Page, String> {
    let mut reader = Reader::from_str(xml);
    let mut page = Page { uploads: Vec::new(), next: None };
    let (mut truncated, mut next_key, mut next_id) = (false, None, None);
    let mut current: Option<(Option<String>, Option<String>, Option<String>)> = None;
    loop {
        match reader.read_event().map_err(|e| e.to_string())? {
            Event::Start(e) => {
                let name = e.local_name().as_ref().as_bytes().to_vec();
                match name.as_slice() {
                    b"Upload" => current = Some((None, None, None)),
                    b"Key"
                    | b"UploadId"
                    | b"Initiated"
                    | b"IsTruncated"
                    | b"NextKeyMarker"
                    | b"NextUploadIdMarker" => {
                        let raw = reader.read_text(e.name()).map_err(|e| e.to_string())?;
                        let text = quick_xml::escape::unescape(&raw).map_err(|e| e.to_string())?.into_owned();
                        match (name.as_slice(), current.as_mut()) {
                            (b"Key", Some(c)) => c.0 = Some(text),
                            (b"UploadId", Some(c)) => c.1 = Some(text),
                            (b"Initiated", Some(c)) => c.2 = Some(text),
                            (b"IsTruncated", _) => truncated = text == "true",
                            (b"NextKeyMarker", None) => next_key = Some(text),
                            (b"NextUploadIdMarker", None) => next_id = Some(text),
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
            Event::End(e) if e.local_name().as_ref() == "Upload" => {
                if let Some((Some(key), Some(upload_id), initiated)) = current.take() {
                    let initiated_ms = match initiated {
                        Some(t) => chrono::DateTime::parse_from_rfc3339(&t)
                            .map_err(|e| format!("Initiated {t:?}: {e}"))?
                            .timestamp_millis(),
                        None => 0,
                    };
                    page.uploads.push(UploadListing { key, upload_id, initiated_ms });
                } else {
                    return Err("an <Upload> without <Key> or <UploadId>".into());
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if truncated {
        page.next = Some((next_key.unwrap_or_default(), next_id.unwrap_or_default()));
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_uploads_and_the_next_page() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>b</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>
  <NextKeyMarker>t/b&amp;c</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker>
  <IsTruncated>true</IsTruncated>
  <Upload><Key>t/a</Key><UploadId>u1</UploadId><Initiated>2026-11-27T10:00:00.000Z</Initiated></Upload>
  <Upload><Key>t/b&amp;c</Key><UploadId>u2</UploadId><Initiated>2026-11-27T10:00:01.500Z</Initiated></Upload>
</ListMultipartUploadsResult>"#;
        let page = parse(xml).unwrap();
        assert_eq!(page.uploads.len(), 2);
        assert_eq!(page.uploads[1].key, "t/b&c");
        assert_eq!(page.uploads[1].initiated_ms - page.uploads[0].initiated_ms, 1500);
        assert_eq!(page.next, Some(("t/b&c".into(), "u2".into())));
        assert_eq!(encode("a b/c=d"), "a%20b%2Fc%3Dd");
    }
}
