//! Extractors whose rejections are [`ApiError`]s: a JSON body that refuses a wrong content
//! type (`unsupported-media-type`), an oversize body (`payload-too-large`), bad JSON and
//! unknown fields (`bad-request`); path and query parameters; the request source header.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use bytes::BytesMut;
use http_body_util::BodyExt as _;
use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, MapAccess, Visitor};
use ui_sync::RequestSource;

use crate::error::{ApiError, ErrorCode};
use crate::limits::MAX_BODY_BYTES;

/// A JSON object request body of type `T` (deserialised with its own serde rules, so
/// `deny_unknown_fields` types refuse unknown fields).
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    // Case-insensitive without a lowered copy: every `ui.*` request asks.
    let starts = |prefix: &str| {
        essence
            .get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    };
    let ends = |suffix: &str| {
        essence
            .len()
            .checked_sub(suffix.len())
            .and_then(|at| essence.get(at..))
            .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
    };
    essence.eq_ignore_ascii_case("application/json") || (starts("application/") && ends("+json"))
}

impl<T, S> FromRequest<S> for JsonBody<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, Self::Rejection> {
        let bytes = json_bytes(req).await?;
        decode(&bytes).map(JsonBody)
    }
}

/// A JSON request body of type `T` that may be an object or an array: only for the one
/// route whose wire shape allows a list (`POST /ui/changes`, `sync.md` §4.5). Refuses
/// what [`JsonBody`] refuses otherwise.
#[derive(Debug, Clone)]
pub(crate) struct JsonObjectOrList<T>(pub(crate) T);

impl<T, S> FromRequest<S> for JsonObjectOrList<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, Self::Rejection> {
        let bytes = json_bytes(req).await?;
        if !matches!(first_byte(&bytes), Some(b'{' | b'[')) {
            return Err(ApiError::bad_request(
                "The body must be a JSON object or array.",
            ));
        }
        parse(&bytes).map(JsonObjectOrList)
    }
}

/// The bytes of a JSON request body: refuses a wrong content type, an oversize body (over
/// [`MAX_BODY_BYTES`], the limit [`crate::router`] also sets for every other extractor) and
/// a body that does not arrive in time. The body is read here, piece by piece, rather than
/// through axum's `Bytes` extractor, which looks the limit up in the request's extensions
/// and boxes the body once more, or through `http_body_util`'s `Limited` and `collect`,
/// which queue the pieces in a list allocated for every body, even a body of one piece
/// (`benches/NOTES.md`).
pub(crate) async fn json_bytes(req: Request) -> Result<Bytes, ApiError> {
    let json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(is_json);
    if !json {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "Send the body as `Content-Type: application/json`.",
        ));
    }
    let mut body = req.into_body();
    // A body of one piece (a page's usual request) is kept as it came, without a copy;
    // from a second piece on, the pieces are joined in `joined`.
    let mut first = Bytes::new();
    let mut joined: Option<BytesMut> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| unread(&e))?;
        // Trailers carry no JSON.
        let Ok(piece) = frame.into_data() else {
            continue;
        };
        if piece.is_empty() {
            continue;
        }
        let len = joined.as_ref().map_or(first.len(), BytesMut::len);
        if piece.len() > MAX_BODY_BYTES - len {
            return Err(too_large());
        }
        match &mut joined {
            Some(all) => all.extend_from_slice(&piece),
            None if first.is_empty() => first = piece,
            None => {
                let mut all = BytesMut::with_capacity(first.len() + piece.len());
                all.extend_from_slice(&first);
                all.extend_from_slice(&piece);
                joined = Some(all);
            }
        }
    }
    Ok(joined.map_or(first, BytesMut::freeze))
}

/// The answer to a body that failed to arrive: `request-timeout` past its deadline,
/// `bad-request` otherwise.
fn unread(e: &axum::Error) -> ApiError {
    if crate::server::is_body_timeout(e) {
        ApiError::new(
            ErrorCode::RequestTimeout,
            "The body did not arrive in time.",
        )
    } else {
        ApiError::bad_request(format!("The body could not be read: {e}."))
    }
}

/// `payload-too-large` for a body over [`MAX_BODY_BYTES`].
pub(crate) fn too_large() -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("The body is larger than {MAX_BODY_BYTES} bytes."),
    )
}

/// Parses JSON `bytes` as a `T`; any failure is `bad-request` naming what is wrong. Every
/// body of the API is a JSON object (serde would also read a struct from an array).
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if first_byte(bytes) != Some(b'{') {
        return Err(ApiError::bad_request("The body must be a JSON object."));
    }
    parse(bytes)
}

/// The first byte of `bytes` that is not JSON whitespace.
fn first_byte(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// JSON text is UTF-8: the body is checked once as a whole, then parsed as text, which
/// takes the same bodies as parsing the bytes and spares serde_json a check per string
/// (about a fifth of a `ui.query` body's parse). Half a surrogate pair, as a JavaScript
/// client's `JSON.stringify` writes it (say a reply cut into deltas by UTF-16 units), reads
/// as U+FFFD instead of refusing the body ([`ui_core::text::json_lone_surrogates_replaced`]).
fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ApiError::bad_request(format!("The body is not valid: it is not UTF-8 ({e})."))
    })?;
    serde_json::from_str(&ui_core::text::json_lone_surrogates_replaced(text))
        .map_err(|e| ApiError::bad_request(format!("The body is not valid: {e}.")))
}

/// Path parameters of type `T`; a mismatch is `bad-request`.
#[derive(Debug, Clone)]
pub struct Params<T>(pub T);

impl<T, S> FromRequestParts<S> for Params<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Params(p.0))
            .map_err(|e| ApiError::bad_request(format!("The path is not valid: {e}.")))
    }
}

/// Query-string parameters of type `T`; a mismatch is `bad-request`.
#[derive(Debug, Clone)]
pub struct QueryParams<T>(pub T);

impl<T, S> FromRequestParts<S> for QueryParams<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| QueryParams(q.0))
            .map_err(|e| ApiError::bad_request(format!("The query string is not valid: {e}.")))
    }
}

/// `?cursor=` of `/ui/events` and `/ui/poll`. Other parameters are ignored. A `cursor`
/// given more than once is not a `400`: it reads as a malformed cursor, which the feed
/// answers with a reset (`sync.md` §4.3: a malformed cursor is a reset, so a client always
/// recovers).
#[derive(Debug, Default)]
pub(crate) struct CursorParam {
    pub(crate) cursor: Option<String>,
}

impl<'de> Deserialize<'de> for CursorParam {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Params;
        impl<'de> Visitor<'de> for Params {
            type Value = CursorParam;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("query parameters")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CursorParam, A::Error> {
                let mut cursor = None;
                let mut repeated = false;
                while let Some((key, value)) = map.next_entry::<String, String>()? {
                    if key == "cursor" {
                        repeated |= cursor.is_some();
                        cursor = Some(value);
                    }
                }
                if repeated {
                    // Not a cursor of any log: `read_after` answers the reset `invalid`.
                    cursor = Some(String::new());
                }
                Ok(CursorParam { cursor })
            }
        }
        deserializer.deserialize_map(Params)
    }
}

/// The header pages send with every write (`sync.md` §4.4).
pub const REQUEST_SOURCE_HEADER: &str = "x-ui-request-source";

/// The header of a write response that recorded events: the highest cursor assigned.
pub const SYNC_SEQ_HEADER: &str = "x-ui-sync-seq";

/// The validated `X-UI-Request-Source` of a request; an invalid value counts as absent,
/// never as an error. Used only to copy it into recorded events.
#[derive(Debug, Clone, Default)]
pub struct WriteSource(pub Option<RequestSource>);

impl<S: Send + Sync> FromRequestParts<S> for WriteSource {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(WriteSource(request_source(&parts.headers)))
    }
}

/// The validated `X-UI-Request-Source` of `headers` (an invalid value counts as absent).
pub(crate) fn request_source(headers: &axum::http::HeaderMap) -> Option<RequestSource> {
    headers
        .get(REQUEST_SOURCE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(RequestSource::parse)
}

#[cfg(test)]
mod tests {
    use super::{MAX_BODY_BYTES, is_json, json_bytes};
    use axum::body::{Body, Bytes};
    use axum::extract::Request;

    /// A JSON request whose body arrives in `pieces`, the last one possibly an error.
    fn in_pieces(pieces: Vec<Result<Bytes, std::io::Error>>) -> Request {
        Request::builder()
            .header("content-type", "application/json")
            .body(Body::from_stream(futures_util::stream::iter(pieces)))
            .expect("a request")
    }

    #[tokio::test]
    async fn a_body_in_pieces_is_read_whole_and_within_its_limit() {
        let piece = |s: &'static str| Ok(Bytes::from_static(s.as_bytes()));
        // One piece, several, empty ones between, none at all.
        for (pieces, whole) in [
            (vec![piece(r#"{"a":1}"#)], r#"{"a":1}"#),
            (
                vec![piece(r#"{"a""#), piece(":"), piece(r#"1}"#)],
                r#"{"a":1}"#,
            ),
            (vec![piece(""), piece("{}"), piece("")], "{}"),
            (vec![], ""),
        ] {
            let bytes = json_bytes(in_pieces(pieces)).await.expect("the body");
            assert_eq!(bytes, whole.as_bytes());
        }
        // At the limit in two pieces, then one byte over it.
        let half = Bytes::from(vec![b' '; MAX_BODY_BYTES / 2]);
        let pieces = vec![Ok(half.clone()), Ok(half.clone())];
        assert_eq!(
            json_bytes(in_pieces(pieces))
                .await
                .expect("at the limit")
                .len(),
            MAX_BODY_BYTES
        );
        let pieces = vec![Ok(half.clone()), Ok(half), piece(" ")];
        let e = json_bytes(in_pieces(pieces))
            .await
            .expect_err("over the limit");
        assert_eq!(e.code().as_str(), "payload-too-large");
        // A connection that fails mid-body.
        let pieces = vec![piece("{"), Err(std::io::Error::other("reset"))];
        let e = json_bytes(in_pieces(pieces))
            .await
            .expect_err("a failed body");
        assert_eq!(e.code().as_str(), "bad-request");
    }

    #[test]
    fn json_content_types() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/x-www-form-urlencoded"));
        // As the lowered copy read them.
        let reference = |content_type: &str| {
            let essence = content_type.split(';').next().unwrap_or_default().trim();
            let essence = essence.to_ascii_lowercase();
            essence == "application/json"
                || (essence.starts_with("application/") && essence.ends_with("+json"))
        };
        for content_type in [
            "",
            "json",
            "+json",
            "application/",
            "application/+json",
            "APPLICATION/LD+JSON",
            " application/json ;x",
            "application/jsonx",
            "xapplication/json",
            "application/jsoné",
            "éapplication/json",
            "application/é+json",
            "application/json+",
            "text/+json",
            "application/vnd.api+json;charset=utf-8",
            "application/ json",
            "applicatioN/Json",
        ] {
            assert_eq!(
                is_json(content_type),
                reference(content_type),
                "{content_type:?}"
            );
        }
    }
}
