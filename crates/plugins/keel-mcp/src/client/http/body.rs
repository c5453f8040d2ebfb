//! Reading response bodies within limits: JSON bodies and error bodies bounded, SSE events
//! capped per event.

use super::*;

/// Whether a `Content-Type` value names `expected` (case-insensitive, parameters ignored).
pub(super) fn media_type_is(value: &[u8], expected: &str) -> bool {
    value
        .split(|byte| *byte == b';')
        .next()
        .and_then(|essence| std::str::from_utf8(essence).ok())
        .is_some_and(|essence| {
            essence
                .trim_matches([' ', '\t'])
                .eq_ignore_ascii_case(expected)
        })
}

/// A whole body of at most `max_size` bytes (counted as they arrive).
pub(super) async fn read_bounded_body<S>(
    stream: S,
    content_length: Option<u64>,
    max_size: usize,
) -> Result<Vec<u8>, Error>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>>,
{
    if content_length.is_some_and(|length| length > max_size as u64) {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size });
    }
    futures::pin_mut!(stream);
    let mut body = Vec::new();
    while let Some(chunk) = stream.try_next().await.map_err(client_error)? {
        if chunk.len() > max_size - body.len() {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// At most the first `max_size` bytes of a body, for a message; the rest is not read.
pub(super) async fn read_truncated_body<S>(stream: S, max_size: usize) -> Result<Vec<u8>, Error>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>>,
{
    let mut body = Vec::new();
    futures::pin_mut!(stream);
    while body.len() < max_size {
        let Some(chunk) = stream.try_next().await.map_err(client_error)? else {
            break;
        };
        let count = chunk.len().min(max_size - body.len());
        body.extend_from_slice(&chunk[..count]);
    }
    Ok(body)
}

/// Why an SSE byte stream stopped.
#[derive(Debug, thiserror::Error)]
pub(super) enum BoundedSseError {
    #[error(transparent)]
    Source(HttpError),
    #[error("SSE event exceeded the maximum size of {max_size} bytes")]
    EventTooLarge { max_size: usize },
}

/// Counts the bytes an SSE event keeps (data lines, not comments) as they arrive.
#[derive(Debug)]
pub(super) struct SseEventSizeLimiter {
    max_size: usize,
    retained_size: usize,
    line_size: usize,
    line_is_comment: bool,
    previous_was_cr: bool,
}

impl SseEventSizeLimiter {
    fn new(max_size: usize) -> Self {
        Self {
            max_size,
            retained_size: 0,
            line_size: 0,
            line_is_comment: false,
            previous_was_cr: false,
        }
    }

    fn observe(&mut self, chunk: &[u8]) -> Result<(), ()> {
        for &byte in chunk {
            if self.previous_was_cr {
                self.previous_was_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\r' => {
                    self.finish_line()?;
                    self.previous_was_cr = true;
                }
                b'\n' => self.finish_line()?,
                _ => {
                    if self.line_size == 0 {
                        self.line_is_comment = byte == b':';
                    }
                    self.line_size = self.line_size.saturating_add(1);
                    self.check_limit()?;
                }
            }
        }
        Ok(())
    }

    fn finish_line(&mut self) -> Result<(), ()> {
        if self.line_size == 0 {
            self.retained_size = 0;
        } else if !self.line_is_comment {
            // The SSE parser joins data lines with a newline.
            self.retained_size = self
                .retained_size
                .saturating_add(self.line_size)
                .saturating_add(1);
        }
        self.line_size = 0;
        self.line_is_comment = false;
        self.check_limit()
    }

    fn check_limit(&self) -> Result<(), ()> {
        if self.retained_size.saturating_add(self.line_size) > self.max_size {
            Err(())
        } else {
            Ok(())
        }
    }
}

/// The SSE events of a response body, each at most `max_event_size` bytes; the stream ends
/// after the first error.
pub(super) fn bounded_sse_stream<S>(
    stream: S,
    max_event_size: usize,
) -> BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Send + 'static,
{
    let limited = stream.scan(
        (SseEventSizeLimiter::new(max_event_size), false),
        |(limiter, failed), item| {
            let next = if *failed {
                None
            } else {
                Some(match item {
                    Ok(chunk) => match limiter.observe(&chunk) {
                        Ok(()) => Ok(chunk),
                        Err(()) => {
                            *failed = true;
                            Err(BoundedSseError::EventTooLarge {
                                max_size: limiter.max_size,
                            })
                        }
                    },
                    Err(e) => {
                        *failed = true;
                        Err(BoundedSseError::Source(HttpError::from(e)))
                    }
                })
            };
            futures::future::ready(next)
        },
    );
    SseStream::from_bytes_stream(limited).boxed()
}

pub(super) const BODY_READ_FAILURE: &str = "<failed to read response body>";

pub(super) fn truncated_read_failure(max_error_response_size: usize) -> String {
    BODY_READ_FAILURE[..BODY_READ_FAILURE.len().min(max_error_response_size)].to_owned()
}

/// A bounded body as text (its charset as reqwest decodes it).
pub(super) async fn decode_error_body(
    body: Vec<u8>,
    content_type: Option<HeaderValue>,
    max_error_response_size: usize,
) -> String {
    if body.is_empty() {
        return String::new();
    }
    let mut buffered = http::Response::new(body);
    if let Some(content_type) = content_type {
        buffered.headers_mut().insert(CONTENT_TYPE, content_type);
    }
    reqwest::Response::from(buffered)
        .text()
        .await
        .unwrap_or_else(|_| truncated_read_failure(max_error_response_size))
}
