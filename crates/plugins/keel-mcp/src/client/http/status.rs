//! What a failed response says: JSON-RPC errors in the body, HTTP status errors, authorization
//! challenges (with their scope), a short preview of the body.

use super::*;

/// `body` as a JSON-RPC error message, if it is one.
pub(super) fn parse_json_rpc_error(body: &str) -> Option<ServerJsonRpcMessage> {
    match serde_json::from_str::<ServerJsonRpcMessage>(body) {
        Ok(message @ ServerJsonRpcMessage::Error(_)) => Some(message),
        _ => None,
    }
}

/// A 429 or 5xx as status and bounded `Retry-After` only.
pub(super) fn http_status_error(
    status: StatusCode,
    headers: &HeaderMap,
) -> Option<HttpStatusError> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = headers
        .get(RETRY_AFTER)
        .filter(|value| value.as_bytes().len() <= MAX_RETRY_AFTER_BYTES)
        .and_then(|value| std::str::from_utf8(value.as_bytes()).ok())
        .map(str::to_owned);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

/// The `scope=` of a `WWW-Authenticate` value (quoted or not).
pub(super) fn extract_scope_from_header(header: &str) -> Option<String> {
    let lower = header.to_ascii_lowercase();
    let pos = lower.find("scope=")?;
    let value = &header[pos + "scope=".len()..];
    if let Some(stripped) = value.strip_prefix('"') {
        return stripped.find('"').map(|end| stripped[..end].to_owned());
    }
    let end = value
        .find(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .unwrap_or(value.len());
    (end > 0).then(|| value[..end].to_owned())
}

/// A 401 or 403 that carries a challenge, as rmcp's errors for it.
pub(super) fn auth_challenge(response: &reqwest::Response) -> Option<Error> {
    let status = response.status();
    if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
        return None;
    }
    let header = response.headers().get(WWW_AUTHENTICATE)?;
    let Ok(header) = header.to_str() else {
        return Some(StreamableHttpError::UnexpectedServerResponse(Cow::from(
            "invalid www-authenticate header value",
        )));
    };
    Some(if status == StatusCode::UNAUTHORIZED {
        StreamableHttpError::AuthRequired(AuthRequiredError::new(header.to_owned()))
    } else {
        StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
            header.to_owned(),
            extract_scope_from_header(header),
        ))
    })
}

/// A short lossy view of a body that is not JSON-RPC.
pub(super) fn body_preview(body: &[u8]) -> Cow<'static, str> {
    if body.is_empty() {
        return Cow::Borrowed("<empty>");
    }
    let lossy = String::from_utf8_lossy(body);
    if lossy.len() <= BODY_PREVIEW {
        return Cow::Owned(lossy.into_owned());
    }
    let mut end = BODY_PREVIEW;
    while end > 0 && !lossy.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(lossy[..end].to_owned())
}
