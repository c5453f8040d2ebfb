//! The web app (docs/web-app.md): `GET /` for a browser (a request that accepts `text/html`)
//! is the app's page; `/assets/…` are its script modules and styles ([`ASSETS`]). All are
//! embedded in the binary (no Node.js toolchain to install keel, no CDN at run time)
//! and pass the same checks as the API (`security::guard`): the page a browser gets from the
//! printed `/?token=` URL carries the cookie, and a browser without it gets a page that says
//! where to find the URL, and no data.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../web/index.html");

/// The app's files under `/assets/`: name, type, content. `app.js` is the module the page
/// loads; it imports the others.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("../web/app.js")),
    ("lib.js", JS, include_str!("../web/lib.js")),
    ("view.js", JS, include_str!("../web/view.js")),
    ("panels.js", JS, include_str!("../web/panels.js")),
    ("pages.js", JS, include_str!("../web/pages.js")),
    ("items.js", JS, include_str!("../web/items.js")),
    ("markdown.js", JS, include_str!("../web/markdown.js")),
    ("settings.js", JS, include_str!("../web/settings.js")),
    ("i18n.js", JS, include_str!("../web/i18n.js")),
    ("trajectory.js", JS, include_str!("../web/trajectory.js")),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../web/app.css"),
    ),
];

const JS: &str = "text/javascript; charset=utf-8";

/// What the page may load: only this server's own script, styles and API (no inline script,
/// no other origin), and it may not be framed by another site.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'self'; \
                   frame-ancestors 'none'";

/// True when the request is a browser's navigation (it accepts HTML).
pub(crate) fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

/// The app's page.
pub(crate) fn index() -> Response {
    page(StatusCode::OK, INDEX)
}

/// The page a browser without the token gets: no data, and where the URL with the token is.
pub(crate) fn no_token() -> Response {
    page(
        StatusCode::UNAUTHORIZED,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>keel: token \
         needed</title></head><body><h1>keel serve needs its token</h1><p>Open the URL that \
         <code>keel serve</code> printed when it started (it ends with \
         <code>?token=…</code>; it is also in <code>$KEEL_HOME/serve.json</code>). The page \
         then keeps the token in a cookie.</p></body></html>",
    )
}

fn page(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

/// `GET /assets/{name}`: one of the app's files ([`ASSETS`]); a JSON 404 for any other name.
pub(crate) async fn asset_named(
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Result<Response, crate::ApiError> {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => Ok(asset(kind, body)),
        None => Err(crate::ApiError::not_found(format!("no asset {name}"))),
    }
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
