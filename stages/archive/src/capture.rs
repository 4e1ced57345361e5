//! Which WARC records a fetch result becomes, and what the archive remembers of a URL:
//! the digest, date and target of its last full capture. A download whose payload has
//! that digest is a revisit (identical-payload-digest profile) referring to it; a 304 is a
//! revisit (server-not-modified) referring to it where it is known; any other download
//! is a response, with its request before it where the fetcher said what it sent.
//!
//! A remembered capture is trusted only if an earlier input record made it (its offset is
//! below this one's). After a crash the input is read again from the last commit while
//! the state may already hold what the lost file's records made: a record whose own state
//! it finds is written in full again, never as a revisit of a capture that may be gone.

use recrawl_schemas::envelope::{decode_as, EnvelopeError, Framed};
use recrawl_schemas::{bounds, FetchOutcome, FetchResult, Format, HttpExchange, Message, ValidationError};
use serde::{Deserialize, Serialize};

use crate::cdxj::{header_text, mime_of};
use crate::warc::{
    digest_text, http_head, record_id, sha1, warc_date, Record, RecordType, Sha1Bytes,
    PROFILE_IDENTICAL_PAYLOAD, PROFILE_SERVER_NOT_MODIFIED,
};

/// The key of a partition's [`SealedFile`] in the state: no URL key (16 hex digits) is.
pub const SEALED_KEY: &str = "~sealed";

/// Longest file name the state accepts.
const MAX_FILE_NAME_BYTES: usize = 1024;

/// Response headers that described the transfer, not the body as stored (the fetcher's
/// client removed the chunking): kept under this prefix, so no reader undoes it twice.
const ORIGINAL_PREFIX: &str = "x-recrawl-original-";
const TRANSFER_HEADERS: [&str; 1] = ["transfer-encoding"];

/// What the archive stage keeps (changelog `state.archive`): per URL key its last full
/// capture, per partition the last file sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArchiveState {
    Capture(Capture),
    Sealed(SealedFile),
}

/// A URL's last full capture (a response record): 20 + 8 + 8 bytes and the target when it
/// is not the URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    pub payload_sha1: Sha1Bytes,
    /// When the fetch finished, Unix ms (the record's WARC-Date is this to the second).
    pub fetched_at_ms: i64,
    /// The input offset of the fetch result it came from.
    pub offset: i64,
    /// Its WARC-Target-URI when that is not the URL (the end of a redirect).
    pub target_uri: Option<String>,
}

/// The last file sealed for a partition: written before the file is published, so that
/// after a crash the new owner of the partition knows which input it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedFile {
    pub name: String,
    /// The input offsets its records came from: `first_offset` up to `next_offset`.
    pub first_offset: i64,
    pub next_offset: i64,
}

impl Message for ArchiveState {
    const NAME: &'static str = "ArchiveState";
    const FORMAT: Format = Format::Bincode;

    fn validate(&self) -> Result<(), ValidationError> {
        let offset = |name: &str, offset: i64| {
            if offset < 0 {
                return Err(ValidationError::NegativeOffset { field: name.to_owned(), value: offset });
            }
            Ok(())
        };
        match self {
            Self::Capture(capture) => {
                bounds::time_ms("fetched_at_ms", capture.fetched_at_ms)?;
                offset("offset", capture.offset)?;
                bounds::optional_text("target_uri", capture.target_uri.as_deref())
            }
            Self::Sealed(sealed) => {
                bounds::text("name", &sealed.name, MAX_FILE_NAME_BYTES)?;
                if sealed.name.contains('/') {
                    return Err(ValidationError::NotAFileName {
                        field: "name".to_owned(),
                        value: sealed.name.clone(),
                    });
                }
                offset("first_offset", sealed.first_offset)?;
                offset("next_offset", sealed.next_offset)
            }
        }
    }

    fn read_earlier(framed: &Framed<'_>, bytes: &[u8]) -> Result<Self, EnvelopeError> {
        decode_as(framed, bytes)
    }
}

/// How a result was archived, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Response,
    /// Same payload as the last capture: identical-payload-digest.
    Revisit,
    /// A 304: server-not-modified.
    NotModified,
}

/// The records of one fetch result and what its index line says.
#[derive(Debug)]
pub struct Archived<'a> {
    pub kind: Kind,
    /// The request (where known) and the response or revisit, in file order.
    pub records: Vec<Record<'a>>,
    pub target_uri: &'a str,
    pub fetched_at_ms: i64,
    pub mime: Option<String>,
    pub status: u16,
    pub digest: String,
    /// The URL's state from now on, if this changed it.
    pub capture: Option<Capture>,
    /// Payload bytes a revisit did not store again.
    pub saved_bytes: u64,
}

/// The records `result`, read at input `offset`, becomes; `None` for an outcome that is
/// not archived (failures, robots denials, bodies not transferred). `last` is the URL's
/// state, `warcinfo_id` the id of the file's warcinfo record. A revisit gets its request
/// record only with `revisit_requests`: what a replay or an index uses of a revisit is
/// the capture it refers to, and on a recrawl the revisits' requests were a fifth of the
/// archive (BENCHMARKS.md).
pub fn archive<'a>(
    result: &'a FetchResult,
    last: Option<&Capture>,
    offset: i64,
    warcinfo_id: &str,
    revisit_requests: bool,
) -> Option<Archived<'a>> {
    let downloaded = match result.outcome {
        FetchOutcome::Downloaded => true,
        FetchOutcome::NotModified => false,
        _ => return None,
    };
    let status = result.http_status.unwrap_or(if downloaded { 200 } else { 304 });
    let target_uri = result.final_url.as_deref().unwrap_or(&result.url);
    // A state made by this record or a later one (a replay after a crash) is not a capture
    // this record may refer to: the file holding it may never have been published.
    let earlier = last.filter(|capture| capture.offset < offset);
    let reference = earlier.map(|capture| Reference {
        target_uri: capture.target_uri.as_deref().unwrap_or(&result.url),
        id: response_id(
            &result.url,
            capture.target_uri.as_deref().unwrap_or(&result.url),
            capture.fetched_at_ms,
        ),
        fetched_at_ms: capture.fetched_at_ms,
        payload_sha1: capture.payload_sha1,
    });
    let response_head = response_head(result, status);
    let date = warc_date(result.fetched_at_ms);
    let id = response_id(&result.url, target_uri, result.fetched_at_ms);
    let mut fields = vec![
        ("WARC-Date", date.clone()),
        ("WARC-Record-ID", id.clone()),
        ("WARC-Warcinfo-ID", warcinfo_id.to_owned()),
        ("WARC-Target-URI", target_uri.to_owned()),
    ];
    if let Some(ip) = result.exchange.as_ref().and_then(|exchange| exchange.remote_ip.clone()) {
        fields.push(("WARC-IP-Address", ip));
    }
    let payload_sha1 = downloaded.then(|| sha1(&result.body));
    let (kind, payload, digest) = match (payload_sha1, &reference) {
        (Some(payload_sha1), Some(reference)) if reference.payload_sha1 == payload_sha1 => {
            (Kind::Revisit, &[][..], payload_sha1)
        }
        (Some(payload_sha1), _) => (Kind::Response, &result.body[..], payload_sha1),
        (None, reference) => {
            // The payload a 304 confirms is the last capture's; unknown, that of no body.
            (Kind::NotModified, &[][..], reference.as_ref().map_or_else(|| sha1(b""), |r| r.payload_sha1))
        }
    };
    let digest = digest_text(&digest);
    let known_payload = kind != Kind::NotModified || reference.is_some();
    if known_payload {
        fields.push(("WARC-Payload-Digest", digest.clone()));
    }
    let record_type = match kind {
        Kind::Response => RecordType::Response,
        Kind::Revisit | Kind::NotModified => {
            let profile =
                if kind == Kind::Revisit { PROFILE_IDENTICAL_PAYLOAD } else { PROFILE_SERVER_NOT_MODIFIED };
            fields.push(("WARC-Profile", profile.to_owned()));
            if let Some(reference) = &reference {
                fields.push(("WARC-Refers-To", reference.id.clone()));
                fields.push(("WARC-Refers-To-Target-URI", reference.target_uri.to_owned()));
                fields.push(("WARC-Refers-To-Date", warc_date(reference.fetched_at_ms)));
            }
            RecordType::Revisit
        }
    };
    fields.push(("Content-Type", "application/http;msgtype=response".to_owned()));
    let mime = match kind {
        Kind::Response => result.exchange.as_ref().map_or_else(
            || result.content_type.as_deref().map(|value| mime_of(value).to_owned()),
            |exchange| content_type_of(exchange).map(|value| mime_of(&value).to_owned()),
        ),
        Kind::Revisit | Kind::NotModified => Some("warc/revisit".to_owned()),
    };
    let saved_bytes = if kind == Kind::Revisit { result.body.len() as u64 } else { 0 };
    let capture = match (kind, last) {
        // A state from this record or a later one (a replay) stays as it is.
        (Kind::Response, Some(last)) if last.offset >= offset => None,
        (Kind::Response, _) => Some(Capture {
            payload_sha1: payload_sha1.unwrap_or_default(),
            fetched_at_ms: result.fetched_at_ms,
            offset,
            target_uri: (target_uri != result.url).then(|| target_uri.to_owned()),
        }),
        _ => None,
    };
    let response = Record { kind: record_type, fields, head: response_head, payload }.with_block_digest();
    let mut records = Vec::with_capacity(2);
    let with_request = kind == Kind::Response || revisit_requests;
    if let Some(exchange) = result.exchange.as_ref().filter(|_| with_request) {
        records.push(request_record(
            exchange,
            target_uri,
            &date,
            &result.url,
            result.fetched_at_ms,
            &id,
            warcinfo_id,
        ));
    }
    records.push(response);
    Some(Archived {
        kind,
        records,
        target_uri,
        fetched_at_ms: result.fetched_at_ms,
        mime,
        status,
        digest,
        capture,
        saved_bytes,
    })
}

/// Why `result` cannot be written as records, if it cannot: a URL that is no URI (a
/// space, a control character would end the WARC field), or, without an exchange, a kept
/// header holding a line break. The exchange is checked by its own validation.
pub fn unwritable(result: &FetchResult) -> Option<String> {
    let uris = [("url", Some(&result.url)), ("final_url", result.final_url.as_ref())];
    for (name, uri) in uris {
        if uri.is_some_and(|uri| uri.bytes().any(|b| b <= b' ' || b == 0x7f)) {
            return Some(format!("{name} holds a space or a control character: no WARC-Target-URI"));
        }
    }
    let kept = [
        ("content_type", &result.content_type),
        ("etag", &result.etag),
        ("last_modified", &result.last_modified),
    ];
    for (name, value) in kept {
        if value.as_deref().is_some_and(|value| value.contains(['\r', '\n', '\0'])) {
            return Some(format!("{name} holds a line break or NUL"));
        }
    }
    None
}

/// The capture a revisit refers to.
#[derive(Debug)]
struct Reference<'a> {
    target_uri: &'a str,
    id: String,
    fetched_at_ms: i64,
    payload_sha1: Sha1Bytes,
}

/// The id of the response or revisit record of the fetch of `url` (the pick's) that ended
/// at `target_uri` at `fetched_at_ms`: what a later revisit names in WARC-Refers-To.
fn response_id(url: &str, target_uri: &str, fetched_at_ms: i64) -> String {
    record_id(&[b"response", url.as_bytes(), target_uri.as_bytes(), fetched_at_ms.to_string().as_bytes()])
}

/// The status line and headers of the answer: as received where the result carries its
/// exchange, else (a result of schema 1) rebuilt from the headers it kept.
fn response_head(result: &FetchResult, status: u16) -> Vec<u8> {
    match &result.exchange {
        Some(exchange) => {
            let renamed: Vec<(String, &[u8])> = exchange
                .response_headers
                .iter()
                .map(|header| {
                    let name = if TRANSFER_HEADERS.iter().any(|t| header.name.eq_ignore_ascii_case(t)) {
                        format!("{ORIGINAL_PREFIX}{}", header.name)
                    } else {
                        header.name.clone()
                    };
                    (name, header.value.as_slice())
                })
                .collect();
            let start = format!("{} {status} {}", exchange.http_version, exchange.reason);
            http_head(&start, renamed.iter().map(|(name, value)| (name.as_str(), *value)))
        }
        None => {
            let kept = [
                ("content-type", &result.content_type),
                ("etag", &result.etag),
                ("last-modified", &result.last_modified),
            ];
            let headers = kept.iter().filter_map(|(name, value)| Some((*name, value.as_deref()?.as_bytes())));
            http_head(&format!("HTTP/1.1 {status} "), headers)
        }
    }
}

/// The answer's first `Content-Type`, as text.
fn content_type_of(exchange: &HttpExchange) -> Option<String> {
    let header =
        exchange.response_headers.iter().find(|header| header.name.eq_ignore_ascii_case("content-type"))?;
    Some(header_text(&header.value))
}

fn request_record<'a>(
    exchange: &HttpExchange,
    target_uri: &str,
    date: &str,
    url: &str,
    fetched_at_ms: i64,
    response_id: &str,
    warcinfo_id: &str,
) -> Record<'a> {
    let start = format!("{} {} {}", exchange.method, exchange.target, exchange.http_version);
    let head =
        http_head(&start, exchange.request_headers.iter().map(|h| (h.name.as_str(), h.value.as_slice())));
    let id =
        record_id(&[b"request", url.as_bytes(), target_uri.as_bytes(), fetched_at_ms.to_string().as_bytes()]);
    Record {
        kind: RecordType::Request,
        fields: vec![
            ("WARC-Date", date.to_owned()),
            ("WARC-Record-ID", id),
            ("WARC-Warcinfo-ID", warcinfo_id.to_owned()),
            ("WARC-Target-URI", target_uri.to_owned()),
            ("WARC-Concurrent-To", response_id.to_owned()),
            ("Content-Type", "application/http;msgtype=request".to_owned()),
        ],
        head,
        payload: &[],
    }
    .with_block_digest()
}

#[cfg(test)]
mod tests {
    use recrawl_schemas::HttpHeader;

    use super::*;

    /// A download of `http://example.com/a.html` with its exchange, as the fetcher writes it.
    fn with_exchange() -> FetchResult {
        let header = |name: &str, value: &[u8]| HttpHeader { name: name.into(), value: value.to_vec() };
        FetchResult {
            etag: Some("\"v1\"".into()),
            content_type: Some("text/html".into()),
            exchange: Some(HttpExchange {
                method: "GET".into(),
                target: "/a.html?moved=1".into(),
                http_version: "HTTP/1.1".into(),
                request_headers: vec![header("host", b"example.com"), header("user-agent", b"recrawl/0.1")],
                reason: "OK".into(),
                response_headers: vec![header("content-type", b"text/html"), header("x-latin-1", b"caf\xe9")],
                headers_left_out: 1,
                remote_ip: Some("192.0.2.7".into()),
            }),
            ..FetchResult::html_page("http://example.com/a.html", "example.com", 42, "")
        }
    }

    fn field<'a>(record: &'a Record<'_>, name: &str) -> Option<&'a str> {
        record.fields.iter().find(|(field, _)| *field == name).map(|(_, value)| value.as_str())
    }

    fn downloaded(body: &str, fetched_at_ms: i64) -> FetchResult {
        FetchResult {
            body: body.as_bytes().to_vec(),
            fetched_at_ms,
            redirects: Vec::new(),
            ..with_exchange()
        }
    }

    #[test]
    fn a_first_download_is_a_request_and_a_response_remembered() {
        let result = downloaded("<p>one</p>", 1_000_000);
        let archived = archive(&result, None, 7, "<urn:uuid:w>", true).unwrap();
        assert_eq!(archived.kind, Kind::Response);
        let kinds: Vec<RecordType> = archived.records.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, [RecordType::Request, RecordType::Response]);
        let (request, response) = (&archived.records[0], &archived.records[1]);
        assert_eq!(field(request, "WARC-Concurrent-To"), field(response, "WARC-Record-ID"));
        assert!(request.head.starts_with(b"GET /a.html?moved=1 HTTP/1.1\r\nhost: example.com\r\n"));
        assert!(response
            .head
            .starts_with(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nx-latin-1: caf\xe9\r\n"));
        assert_eq!(response.payload, b"<p>one</p>");
        assert_eq!(field(response, "WARC-IP-Address"), Some("192.0.2.7"));
        assert_eq!(field(response, "WARC-Payload-Digest"), Some(digest_text(&sha1(b"<p>one</p>")).as_str()));
        assert_eq!(archived.mime.as_deref(), Some("text/html"));
        let capture = archived.capture.unwrap();
        assert_eq!((capture.offset, capture.fetched_at_ms, capture.target_uri), (7, 1_000_000, None));
    }

    #[test]
    fn the_same_payload_again_is_a_revisit_of_the_first_capture() {
        let first = downloaded("<p>same</p>", 1_000_000);
        let capture = archive(&first, None, 7, "w", true).unwrap().capture.unwrap();
        let again = downloaded("<p>same</p>", 2_000_000);
        let archived = archive(&again, Some(&capture), 9, "w", true).unwrap();
        assert_eq!((archived.kind, archived.saved_bytes, archived.capture), (Kind::Revisit, 11, None));
        let revisit = archived.records.last().unwrap();
        assert_eq!(revisit.kind, RecordType::Revisit);
        assert!(revisit.payload.is_empty());
        assert_eq!(field(revisit, "WARC-Profile"), Some(PROFILE_IDENTICAL_PAYLOAD));
        assert_eq!(field(revisit, "WARC-Refers-To-Date"), Some(warc_date(1_000_000).as_str()));
        assert_eq!(field(revisit, "WARC-Refers-To-Target-URI"), Some("http://example.com/a.html"));
        let first_id = response_id(&first.url, &first.url, 1_000_000);
        assert_eq!(field(revisit, "WARC-Refers-To"), Some(first_id.as_str()));
        assert_eq!(archived.mime.as_deref(), Some("warc/revisit"));
        // A changed payload is a response again, and the capture to refer to from now on.
        let changed = downloaded("<p>new</p>", 3_000_000);
        let archived = archive(&changed, Some(&capture), 11, "w", true).unwrap();
        assert_eq!(archived.kind, Kind::Response);
        assert_eq!(archived.capture.map(|c| c.offset), Some(11));
    }

    #[test]
    fn a_304_is_a_server_not_modified_revisit() {
        let first = downloaded("<p>same</p>", 1_000_000);
        let capture = archive(&first, None, 7, "w", true).unwrap().capture.unwrap();
        let not_modified = FetchResult {
            outcome: FetchOutcome::NotModified,
            http_status: Some(304),
            body: Vec::new(),
            fetched_at_ms: 2_000_000,
            ..with_exchange()
        };
        let archived = archive(&not_modified, Some(&capture), 9, "w", true).unwrap();
        assert_eq!(archived.kind, Kind::NotModified);
        let revisit = archived.records.last().unwrap();
        assert_eq!(field(revisit, "WARC-Profile"), Some(PROFILE_SERVER_NOT_MODIFIED));
        assert_eq!(field(revisit, "WARC-Payload-Digest"), Some(digest_text(&capture.payload_sha1).as_str()));
        assert!(revisit.head.starts_with(b"HTTP/1.1 304 OK\r\n"), "the exchange's reason, as sampled");
        // Its request only when asked for.
        let kinds: Vec<RecordType> = archive(&not_modified, Some(&capture), 9, "w", false)
            .unwrap()
            .records
            .iter()
            .map(|r| r.kind)
            .collect();
        assert_eq!(kinds, [RecordType::Revisit]);
        // Nothing known before: no reference, no payload digest.
        let archived = archive(&not_modified, None, 9, "w", true).unwrap();
        let revisit = archived.records.last().unwrap();
        assert_eq!((field(revisit, "WARC-Refers-To"), field(revisit, "WARC-Payload-Digest")), (None, None));
    }

    #[test]
    fn a_replayed_record_never_refers_to_a_capture_of_its_own_or_later() {
        let first = downloaded("<p>same</p>", 1_000_000);
        let capture = archive(&first, None, 7, "w", true).unwrap().capture.unwrap();
        // Read again after a crash, the state already holding its own capture.
        let archived = archive(&first, Some(&capture), 7, "w", true).unwrap();
        assert_eq!((archived.kind, archived.capture), (Kind::Response, None));
        // An earlier record of the same URL read again while the state holds a later one.
        let later = Capture { offset: 20, ..capture.clone() };
        let earlier = downloaded("<p>same</p>", 500_000);
        let archived = archive(&earlier, Some(&later), 5, "w", true).unwrap();
        assert_eq!((archived.kind, archived.capture), (Kind::Response, None));
    }

    #[test]
    fn failures_and_denials_are_not_archived() {
        for outcome in FetchOutcome::ALL {
            let result = FetchResult { outcome, ..downloaded("x", 1) };
            let archived = archive(&result, None, 1, "w", true).is_some();
            assert_eq!(
                archived,
                matches!(outcome, FetchOutcome::Downloaded | FetchOutcome::NotModified),
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn what_would_break_a_record_s_lines_is_refused() {
        assert_eq!(unwritable(&downloaded("x", 1)), None);
        let spaced = FetchResult { url: "http://example.com/a b".into(), ..downloaded("x", 1) };
        assert!(unwritable(&spaced).is_some_and(|why| why.starts_with("url")));
        let forged = FetchResult { etag: Some("\"v\"\r\nWARC-Type: x".into()), ..downloaded("x", 1) };
        assert!(unwritable(&forged).is_some_and(|why| why.starts_with("etag")));
    }

    #[test]
    fn a_schema_1_result_gets_its_kept_headers_and_no_request() {
        let result = FetchResult { exchange: None, ..downloaded("<p>x</p>", 1) };
        let archived = archive(&result, None, 1, "w", true).unwrap();
        assert_eq!(archived.records.len(), 1);
        assert_eq!(
            archived.records[0].head,
            b"HTTP/1.1 200 \r\ncontent-type: text/html\r\netag: \"v1\"\r\n\r\n"
        );
    }

    #[test]
    fn a_de_chunked_body_keeps_its_transfer_header_renamed() {
        let mut result = downloaded("<p>x</p>", 1);
        if let Some(exchange) = &mut result.exchange {
            exchange.response_headers.push(recrawl_schemas::HttpHeader {
                name: "transfer-encoding".into(),
                value: b"chunked".to_vec(),
            });
        }
        let archived = archive(&result, None, 1, "w", true).unwrap();
        let head = String::from_utf8_lossy(&archived.records[1].head).into_owned();
        assert!(head.contains("\r\nx-recrawl-original-transfer-encoding: chunked\r\n"), "{head}");
    }

    /// What the stage keeps per URL: in memory its 16-digit key and this value, in the
    /// changelog the key and the encoded value.
    #[test]
    fn a_url_s_state_is_small() {
        assert_eq!(std::mem::size_of::<ArchiveState>(), 64);
        let capture = ArchiveState::Capture(Capture {
            payload_sha1: [0xff; 20],
            fetched_at_ms: 1_780_000_000_000,
            offset: 1 << 40,
            target_uri: None,
        });
        let encoded = recrawl_schemas::encode(&capture).unwrap().len();
        assert!(encoded <= 45, "{encoded} bytes");
    }

    #[test]
    fn the_state_round_trips_and_is_checked() {
        let states = [
            ArchiveState::Capture(Capture {
                payload_sha1: [7; 20],
                fetched_at_ms: 5,
                offset: 3,
                target_uri: Some("http://b/".into()),
            }),
            ArchiveState::Sealed(SealedFile { name: "a.warc.gz".into(), first_offset: 1, next_offset: 9 }),
        ];
        for state in states {
            let bytes = recrawl_schemas::encode(&state).unwrap();
            assert_eq!(recrawl_schemas::decode::<ArchiveState>(&bytes).unwrap(), state);
            assert_eq!(state.validate(), Ok(()));
        }
        let forged =
            ArchiveState::Sealed(SealedFile { name: "../x".into(), first_offset: 1, next_offset: 9 });
        assert!(forged.validate().is_err());
        let forged = ArchiveState::Capture(Capture {
            payload_sha1: [0; 20],
            fetched_at_ms: -1,
            offset: 0,
            target_uri: None,
        });
        assert!(forged.validate().is_err());
    }
}
