//! How a message travels on a topic. Messages people read (`Format::Json`) are plain
//! JSON: one object, nothing before the `{`, whose first field names the message type and
//! schema version (`"schema":"recrawl.change-event/2"`). Internal messages
//! (`Format::Bincode`) keep the envelope `[magic, format, version hi, version lo]` before
//! a bincode body. The Kafka headers `content-type` and `schema-version` mirror either.
//! Each type has its own version ([`Message::VERSION`]); a reader takes its type's
//! current version and the earlier ones it declares, and refuses a newer one by name.
//! Readers also take the envelope before a JSON body, which schema 1 wrote on every topic.
//! This module is the only place that calls bincode (pinned `=2.0.1`, unmaintained
//! upstream), so replacing it is local.

use std::borrow::Cow;

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use thiserror::Error;

use crate::validation::ValidationError;

/// First byte of an envelope; not a byte any JSON or text value starts with.
pub const MAGIC: u8 = 0xC5;
/// The newest schema version of any message: the version of the contract as a whole
/// (the AsyncAPI document's). Each type's own is its [`Message::VERSION`].
pub const SCHEMA_VERSION: u16 = 4;
pub const HEADER_LEN: usize = 4;
/// Largest bincode body accepted. bincode allocates a collection's claimed length before
/// reading it, so without a limit a corrupt length prefix aborts the process on
/// allocation; with it, the claim fails as a decode error. The fetch stage's body cap
/// stays below this.
pub const MAX_BINCODE_BODY: usize = 64 << 20;
pub const CONTENT_TYPE_HEADER: &str = "content-type";
pub const SCHEMA_VERSION_HEADER: &str = "schema-version";
/// The field of a plain JSON message that names its type and schema version.
pub const SCHEMA_FIELD: &str = "schema";
/// The `content-type` of plain JSON messages.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// Schema tags longer than this are not looked for at the start of a payload.
const MAX_TAG_BYTES: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Format {
    Bincode = 1,
    Json = 2,
}

impl Format {
    pub fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(Self::Bincode),
            2 => Some(Self::Json),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Bincode => "bincode",
            Self::Json => "json",
        }
    }

    /// How messages of this format are written now.
    pub fn framing(self) -> Framing {
        match self {
            Self::Bincode => Framing::Envelope(self),
            Self::Json => Framing::PlainJson,
        }
    }
}

/// How a payload is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One JSON object whose `schema` field names the type and version.
    PlainJson,
    /// The 4-byte envelope, then a body of the format.
    Envelope(Format),
}

impl Framing {
    /// The `content-type` Kafka header value for this framing.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::PlainJson => JSON_CONTENT_TYPE,
            Self::Envelope(Format::Bincode) => "application/vnd.recrawl+bincode",
            Self::Envelope(Format::Json) => "application/vnd.recrawl+json",
        }
    }
}

/// What a payload says of itself, read without decoding its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framed<'a> {
    pub framing: Framing,
    pub version: u16,
    /// The message type a plain JSON payload names (`change-event`); envelopes do not say.
    /// The version is not checked here: each type knows which versions it reads.
    pub message: Option<Cow<'a, str>>,
}

impl Framed<'_> {
    /// The Kafka headers that go with this payload.
    pub fn kafka_headers(&self) -> [(&'static str, String); 2] {
        [
            (CONTENT_TYPE_HEADER, self.framing.content_type().to_owned()),
            (SCHEMA_VERSION_HEADER, self.version.to_string()),
        ]
    }
}

/// A type that travels on a topic. `NAME` is the payload name used in the topic
/// catalogue and the JSON Schema file names.
pub trait Message: Serialize + DeserializeOwned {
    const NAME: &'static str;
    const FORMAT: Format;
    /// The schema version this build writes for the type. Bump it on any change a reader
    /// of the previous version could not take, and read the previous one in
    /// [`read_earlier`](Self::read_earlier).
    const VERSION: u16 = 1;
    /// Optional fields the type has gained at its end since bincode records of it were
    /// written (schema 1's envelope, or an internal state's earlier versions). Bincode is
    /// positional and has no defaults, so such a record is read with as many `None` tags
    /// (one 0 byte each) appended as it lacks: one to this many, the first that reads
    /// whole (fewer leave the decoder short, more leave trailing bytes).
    const ADDED_TRAILING_OPTIONS: usize = 0;

    /// Checks what a decoded message holds against [`bounds`](crate::messages::bounds),
    /// so that no field from a topic can overflow a stage's arithmetic or memory; the
    /// error names the field.
    fn validate(&self) -> Result<(), ValidationError> {
        Ok(())
    }

    /// Reads a payload of an earlier version of the type (`framed.version < VERSION`).
    fn read_earlier(framed: &Framed<'_>, _bytes: &[u8]) -> Result<Self, EnvelopeError> {
        Err(EnvelopeError::UnknownVersion { name: Self::NAME, found: framed.version, newest: Self::VERSION })
    }
}

/// The state of a stage that keeps none.
impl Message for () {
    const NAME: &'static str = "None";
    const FORMAT: Format = Format::Bincode;
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum EnvelopeError {
    #[error("payload truncated: {len} bytes, the envelope header alone is {HEADER_LEN}")]
    Truncated { len: usize },
    #[error("not a recrawl payload: it starts with byte 0x{0:02x}, neither `{{` (JSON) nor 0x{MAGIC:02x} (the envelope)")]
    BadMagic(u8),
    #[error("unknown format byte {0}")]
    UnknownFormat(u8),
    #[error("a JSON payload without a \"schema\" field naming its type and version: {0}")]
    NoSchemaTag(String),
    #[error("the payload is a {found}, not a {expected}")]
    WrongMessage { expected: String, found: String },
    #[error("{name} of schema version {found}, which this build does not read (it reads up to {newest})")]
    UnknownVersion { name: &'static str, found: u16, newest: u16 },
    #[error("Kafka header {header} is {found:?}, the payload says {expected:?}")]
    HeaderMismatch { header: &'static str, found: String, expected: String },
    #[error("{name} payload does not decode: {reason}")]
    Payload { name: &'static str, reason: String },
    #[error("{name} does not encode: {reason}")]
    Encode { name: &'static str, reason: String },
}

fn bincode_config() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<MAX_BINCODE_BODY>,
> {
    bincode::config::standard().with_limit::<MAX_BINCODE_BODY>()
}

/// `PagePick` → `page-pick`.
pub fn kebab_name(type_name: &str) -> String {
    kebab_chars(type_name).collect()
}

fn kebab_chars(type_name: &str) -> impl Iterator<Item = char> + '_ {
    type_name.chars().enumerate().flat_map(|(i, c)| {
        let dash = (c.is_ascii_uppercase() && i > 0).then_some('-');
        dash.into_iter().chain([c.to_ascii_lowercase()])
    })
}

/// The `schema` field's value for `M`: `recrawl.change-event/2`.
pub fn schema_tag<M: Message>() -> String {
    let mut tag = Vec::new();
    write_schema_tag::<M>(&mut tag);
    String::from_utf8_lossy(&tag).into_owned()
}

fn write_schema_tag<M: Message>(out: &mut Vec<u8>) {
    out.extend_from_slice(b"recrawl.");
    let mut utf8 = [0; 4];
    for c in kebab_chars(M::NAME) {
        out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
    }
    out.extend_from_slice(format!("/{}", M::VERSION).as_bytes());
}

/// Encodes `message` as its format is written: plain JSON with its schema tag first, or
/// the envelope and a bincode body.
pub fn encode<M: Message>(message: &M) -> Result<Vec<u8>, EnvelopeError> {
    let encode_error = |reason: String| EnvelopeError::Encode { name: M::NAME, reason };
    match M::FORMAT {
        Format::Bincode => {
            let [version_hi, version_lo] = M::VERSION.to_be_bytes();
            let mut out = vec![MAGIC, M::FORMAT as u8, version_hi, version_lo];
            bincode::serde::encode_into_std_write(message, &mut out, bincode_config())
                .map_err(|e| encode_error(e.to_string()))?;
            // Encoding does not enforce the limit; refuse here what decoding would refuse.
            let body_len = out.len().saturating_sub(HEADER_LEN);
            if body_len > MAX_BINCODE_BODY {
                return Err(encode_error(format!(
                    "{body_len} bytes exceed the {MAX_BINCODE_BODY}-byte limit"
                )));
            }
            Ok(out)
        }
        Format::Json => {
            // `{"schema":"<tag>"`, then the message's own object with its `{` made the
            // comma that joins the two: no second buffer, no copy.
            let mut out = Vec::with_capacity(512);
            out.extend_from_slice(b"{\"schema\":\"");
            write_schema_tag::<M>(&mut out);
            out.push(b'"');
            let joint = out.len();
            serde_json::to_writer(&mut out, message).map_err(|e| encode_error(e.to_string()))?;
            match out.get(joint..) {
                Some(b"{}") => {
                    out.truncate(joint);
                    out.push(b'}');
                }
                Some([b'{', ..]) => out[joint] = b',',
                _ => return Err(encode_error("a JSON message must be an object".to_owned())),
            }
            Ok(out)
        }
    }
}

/// Decodes a payload written by [`encode`], by an earlier version the type reads, or by
/// schema 1's envelope, checking its type and version before the body.
pub fn decode<M: Message>(bytes: &[u8]) -> Result<M, EnvelopeError> {
    let framed = inspect(bytes)?;
    if let Some(found) = &framed.message {
        if !found.chars().eq(kebab_chars(M::NAME)) {
            return Err(EnvelopeError::WrongMessage {
                expected: kebab_name(M::NAME),
                found: found.to_string(),
            });
        }
    }
    match framed.version.cmp(&M::VERSION) {
        std::cmp::Ordering::Equal => decode_as(&framed, bytes),
        std::cmp::Ordering::Less if framed.version > 0 => M::read_earlier(&framed, bytes),
        _ => Err(EnvelopeError::UnknownVersion { name: M::NAME, found: framed.version, newest: M::VERSION }),
    }
}

/// Decodes the body of a payload framed as `framed` says into `M`'s shape, whatever the
/// version: [`decode`] has checked it, or a `read_earlier` names the earlier shape.
pub fn decode_as<M: Message>(framed: &Framed<'_>, bytes: &[u8]) -> Result<M, EnvelopeError> {
    let payload_error = |reason: String| EnvelopeError::Payload { name: M::NAME, reason };
    match framed.framing {
        Framing::PlainJson => serde_json::from_slice(bytes).map_err(|e| payload_error(e.to_string())),
        Framing::Envelope(Format::Json) => {
            serde_json::from_slice(&bytes[HEADER_LEN..]).map_err(|e| payload_error(e.to_string()))
        }
        Framing::Envelope(Format::Bincode) => {
            let body = &bytes[HEADER_LEN..];
            let whole = |body: &[u8]| {
                let (message, read) = bincode::serde::decode_from_slice::<M, _>(body, bincode_config())
                    .map_err(|e| payload_error(e.to_string()))?;
                match body.len().saturating_sub(read) {
                    0 => Ok(message),
                    trailing => Err(payload_error(format!("{trailing} trailing bytes"))),
                }
            };
            whole(body).or_else(|error| {
                (1..=M::ADDED_TRAILING_OPTIONS)
                    .find_map(|missing| {
                        let mut padded = body.to_vec();
                        padded.resize(body.len().saturating_add(missing), 0);
                        whole(&padded).ok()
                    })
                    .ok_or(error)
            })
        }
    }
}

/// Checks a record encoded by this build against its committed bytes at `fixture`, for the
/// tests that pin a changelog layout: a changed layout fails until the type's version is
/// bumped and earlier records are read. With `RECRAWL_BLESS` set it writes the fixture.
pub fn check_fixture<M: Message + PartialEq + std::fmt::Debug>(
    record: &M,
    fixture: &std::path::Path,
) -> Result<(), String> {
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", fixture.display());
    let bytes = encode(record).map_err(|e| at(&e))?;
    if std::env::var_os("RECRAWL_BLESS").is_some() {
        std::fs::write(fixture, &bytes).map_err(|e| at(&e))?;
    }
    let committed = std::fs::read(fixture).map_err(|e| at(&format!("{e} (RECRAWL_BLESS=1 writes it)")))?;
    if bytes != committed {
        return Err(at(&format!(
            "{} encodes otherwise: a changed layout needs a version bump and a reader of the earlier one",
            M::NAME
        )));
    }
    match decode::<M>(&committed) {
        Ok(decoded) if decoded == *record => Ok(()),
        Ok(decoded) => Err(at(&format!("reads back as {decoded:?}"))),
        Err(e) => Err(at(&e)),
    }
}

/// Reads how `bytes` is framed, its schema version and, for plain JSON, the type it names.
pub fn inspect(bytes: &[u8]) -> Result<Framed<'_>, EnvelopeError> {
    // JSON may begin with whitespace; an envelope begins with its magic byte.
    let framed = match bytes.iter().find(|byte| !byte.is_ascii_whitespace()) {
        Some(b'{') => {
            let tag = json_schema_tag(bytes)?;
            let parsed = tag
                .strip_prefix("recrawl.")
                .and_then(|tag| tag.rsplit_once('/'))
                .filter(|(_, version)| !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|(message, version)| Some((message.len(), version.parse::<u16>().ok()?)));
            let Some((message_len, version)) = parsed else {
                return Err(EnvelopeError::NoSchemaTag(format!(
                    "{tag:?} is not recrawl.<message>/<version>"
                )));
            };
            let start = "recrawl.".len();
            let end = start.saturating_add(message_len);
            let message = match tag {
                Cow::Borrowed(tag) => Cow::Borrowed(&tag[start..end]),
                Cow::Owned(tag) => Cow::Owned(tag[start..end].to_owned()),
            };
            Framed { framing: Framing::PlainJson, version, message: Some(message) }
        }
        _ => {
            let [magic, format, version_hi, version_lo, ..] = *bytes else {
                return Err(match bytes.first() {
                    Some(&byte) if byte != MAGIC => EnvelopeError::BadMagic(byte),
                    _ => EnvelopeError::Truncated { len: bytes.len() },
                });
            };
            if magic != MAGIC {
                return Err(EnvelopeError::BadMagic(magic));
            }
            let format = Format::from_byte(format).ok_or(EnvelopeError::UnknownFormat(format))?;
            let version = u16::from_be_bytes([version_hi, version_lo]);
            Framed { framing: Framing::Envelope(format), version, message: None }
        }
    };
    Ok(framed)
}

/// The `schema` field of a JSON object: read from the start, where [`encode`] writes it,
/// or else from a parse of the whole object (another producer's field order).
fn json_schema_tag(bytes: &[u8]) -> Result<Cow<'_, str>, EnvelopeError> {
    const PREFIX: &[u8] = b"{\"schema\":\"";
    if let Some(rest) = bytes.strip_prefix(PREFIX) {
        let window = &rest[..rest.len().min(MAX_TAG_BYTES)];
        if let Some(end) = window.iter().position(|&b| b == b'"' || b == b'\\') {
            if window[end] == b'"' {
                if let Ok(tag) = std::str::from_utf8(&window[..end]) {
                    return Ok(Cow::Borrowed(tag));
                }
            }
        }
    }
    #[derive(Deserialize)]
    struct Tagged {
        schema: Option<String>,
    }
    match serde_json::from_slice::<Tagged>(bytes) {
        Ok(Tagged { schema: Some(tag) }) => Ok(Cow::Owned(tag)),
        Ok(Tagged { schema: None }) => Err(EnvelopeError::NoSchemaTag("the field is missing".to_owned())),
        Err(error) => Err(EnvelopeError::NoSchemaTag(error.to_string())),
    }
}

/// The Kafka headers of a `M` payload as [`encode`] writes it.
pub fn kafka_headers<M: Message>() -> [(&'static str, String); 2] {
    [
        (CONTENT_TYPE_HEADER, M::FORMAT.framing().content_type().to_owned()),
        (SCHEMA_VERSION_HEADER, M::VERSION.to_string()),
    ]
}

/// Checks that Kafka headers, where present, agree with what the payload says of itself.
/// A producer that sets no headers is accepted: the payload is authoritative.
pub fn check_kafka_headers(
    bytes: &[u8],
    content_type: Option<&[u8]>,
    schema_version: Option<&[u8]>,
) -> Result<(), EnvelopeError> {
    let framed = inspect(bytes)?;
    for ((header, expected), found) in framed.kafka_headers().into_iter().zip([content_type, schema_version])
    {
        if let Some(found) = found {
            let found = String::from_utf8_lossy(found);
            // A media type may carry parameters (`application/json; charset=utf-8`).
            let value = found.split(';').next().unwrap_or_default().trim();
            if !value.eq_ignore_ascii_case(&expected) {
                return Err(EnvelopeError::HeaderMismatch { header, found: found.into_owned(), expected });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{bounds, samples};
    use crate::{ChangeEvent, PagePick};

    #[test]
    fn round_trips_both_formats() {
        let pick = samples::page_pick();
        let bytes = encode(&pick).unwrap();
        assert_eq!(&bytes[..4], &[MAGIC, 1, 0, 1]);
        assert_eq!(decode::<PagePick>(&bytes).unwrap(), pick);

        let event = samples::change_event();
        let bytes = encode(&event).unwrap();
        // What analysts read: one JSON object, nothing before it, the tag first.
        let tag = format!("recrawl.change-event/{}", ChangeEvent::VERSION);
        assert!(
            bytes.starts_with(format!(r#"{{"schema":"{tag}","#).as_bytes()),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(json["page"]["url"], event.page.url);
        assert_eq!(json["fetched_at"], "2026-05-28T20:26:40.000Z");
        assert_eq!(json[SCHEMA_FIELD], tag.as_str());
        assert_eq!(decode::<ChangeEvent>(&bytes).unwrap(), event);
        assert_eq!(
            inspect(&bytes).unwrap(),
            Framed {
                framing: Framing::PlainJson,
                version: ChangeEvent::VERSION,
                message: Some("change-event".into())
            }
        );
    }

    /// Records schema 1 wrote (the envelope before a JSON body of schema 1's shape) are
    /// still read, as schema 2.
    #[test]
    fn enveloped_json_is_still_read() {
        let plain_v1 = include_bytes!("../fixtures/v1/change-event.json");
        let mut bytes = vec![MAGIC, Format::Json as u8, 0, 1];
        bytes.extend_from_slice(plain_v1);
        assert_eq!(decode::<ChangeEvent>(&bytes).unwrap(), samples::change_event());
        assert_eq!(check_kafka_headers(&bytes, Some(b"application/vnd.recrawl+json"), Some(b"1")), Ok(()));
    }

    /// Another producer's field order, and whitespace, are fine; the tag is found anyway.
    #[test]
    fn the_tag_is_found_anywhere_in_the_object() {
        // At the type's own version, whatever it is, and one past it: a version bump
        // leaves this test as it is.
        let (version, next) = (ChangeEvent::VERSION, ChangeEvent::VERSION + 1);
        let event = samples::change_event();
        let mut fields = serde_json::to_value(&event).unwrap();
        fields[SCHEMA_FIELD] = format!("recrawl.change-event/{version}").into();
        let mut pretty = b"\n  ".to_vec();
        pretty.extend(serde_json::to_vec_pretty(&fields).unwrap());
        assert_eq!(decode::<ChangeEvent>(&pretty).unwrap(), event);
        assert_eq!(
            check_kafka_headers(
                &pretty,
                Some(b"application/json; charset=utf-8"),
                Some(version.to_string().as_bytes())
            ),
            Ok(())
        );
        fields[SCHEMA_FIELD] = format!("recrawl.change-event/{next}").into();
        let newer = serde_json::to_vec(&fields).unwrap();
        let error = decode::<ChangeEvent>(&newer).unwrap_err();
        assert_eq!(
            error,
            EnvelopeError::UnknownVersion { name: "ChangeEvent", found: next, newest: version }
        );
        assert_eq!(
            error.to_string(),
            format!("ChangeEvent of schema version {next}, which this build does not read (it reads up to {version})")
        );
    }

    #[test]
    fn every_decode_error_is_typed() {
        let good = encode(&samples::page_pick()).unwrap();
        for len in 0..HEADER_LEN {
            assert_eq!(decode::<PagePick>(&good[..len]), Err(EnvelopeError::Truncated { len }));
        }
        let mut bad = good.clone();
        bad[0] = b'x';
        assert_eq!(decode::<PagePick>(&bad), Err(EnvelopeError::BadMagic(b'x')));
        let mut bad = good.clone();
        bad[1] = 9;
        assert_eq!(decode::<PagePick>(&bad), Err(EnvelopeError::UnknownFormat(9)));
        let mut bad = good.clone();
        bad[2] = 0x12;
        assert_eq!(
            decode::<PagePick>(&bad),
            Err(EnvelopeError::UnknownVersion { name: "PagePick", found: 0x1201, newest: 1 })
        );
        let mut bad = good.clone();
        bad[3] = 0;
        assert_eq!(
            decode::<PagePick>(&bad),
            Err(EnvelopeError::UnknownVersion { name: "PagePick", found: 0, newest: 1 })
        );
        let json = encode(&samples::change_event()).unwrap();
        assert_eq!(
            decode::<PagePick>(&json),
            Err(EnvelopeError::WrongMessage { expected: "page-pick".into(), found: "change-event".into() })
        );
        for untagged in [
            &br#"{"url":"http://a/"}"#[..],
            br#"{"schema":7}"#,
            br#"{"schema":"change-event"}"#,
            br#"{"schema":"recrawl.change-event/+1"}"#,
            b"{",
        ] {
            assert!(
                matches!(decode::<ChangeEvent>(untagged), Err(EnvelopeError::NoSchemaTag(_))),
                "{}",
                String::from_utf8_lossy(untagged)
            );
        }
        // A body cut short, and one with bytes left over, are payload errors, not panics.
        assert!(matches!(decode::<PagePick>(&good[..good.len() - 3]), Err(EnvelopeError::Payload { .. })));
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(decode::<PagePick>(&long), Err(EnvelopeError::Payload { .. })));
        let cut = &json[..json.len() - 1];
        assert!(matches!(decode::<ChangeEvent>(cut), Err(EnvelopeError::Payload { .. })));
    }

    #[test]
    fn a_huge_length_prefix_is_an_error_not_an_allocation() {
        // A pick whose URL claims 2^62 bytes (varint marker 0xFD + 8 bytes): without the
        // limit bincode allocates that much before reading and the process aborts.
        let mut bytes = vec![MAGIC, Format::Bincode as u8, 0, 1, 0xFD];
        bytes.extend_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(matches!(decode::<PagePick>(&bytes), Err(EnvelopeError::Payload { .. })));
    }

    #[test]
    fn payloads_over_the_limit_are_refused_when_encoding() {
        let mut result = samples::fetch_result();
        result.body = vec![0; MAX_BINCODE_BODY + 1];
        assert!(matches!(encode(&result), Err(EnvelopeError::Encode { .. })));
    }

    #[test]
    fn messages_out_of_bounds_fail_validation_naming_the_field() {
        assert_eq!(samples::page_pick().validate(), Ok(()));
        assert_eq!(samples::fetch_result().validate(), Ok(()));
        assert_eq!(samples::change_event().validate(), Ok(()));
        let mut pick = samples::page_pick();
        pick.url = format!("http://example.com/{}", "a".repeat(9000));
        assert!(pick.validate().unwrap_err().to_string().contains("url"));
        let mut pick = samples::page_pick();
        pick.period = u64::MAX;
        assert!(pick.validate().unwrap_err().to_string().contains("period"));
        let mut pick = samples::page_pick();
        pick.score = f64::NAN;
        assert!(pick.validate().unwrap_err().to_string().contains("score"));
        let mut result = samples::fetch_result();
        result.fetched_at_ms = -5;
        assert!(result.validate().unwrap_err().to_string().contains("fetched_at_ms"));
        // Kept as an `f32` by the stages, where 1e39 is infinite, then written as JSON null.
        let mut result = samples::fetch_result();
        result.latency_ms = 1e39;
        assert!(result.validate().unwrap_err().to_string().contains("latency_ms"));
        let mut result = samples::fetch_result();
        result.size_bytes = u64::MAX;
        assert!(result.validate().unwrap_err().to_string().contains("size_bytes"));
        let mut event = samples::change_event();
        event.previous_size_bytes = Some(1 << 63);
        assert!(event.validate().unwrap_err().to_string().contains("previous_size_bytes"));
        // A forecast past certainty would outrank every page for good.
        assert_eq!(samples::page_estimate().validate(), Ok(()));
        let mut estimate = samples::page_estimate();
        estimate.downloads.next = 1e39;
        assert!(estimate.validate().unwrap_err().to_string().contains("downloads.next"));
        let mut estimate = samples::page_estimate();
        estimate.changes_forecast.probabilities[0] = 1.5;
        assert!(estimate.validate().unwrap_err().to_string().contains("changes_forecast.probabilities"));
        let mut estimate = samples::page_estimate();
        estimate.last_request.latency_ms = f64::MAX;
        assert!(estimate.validate().unwrap_err().to_string().contains("last_request.latency_ms"));
        // A comparison only on a download, and not on a first one.
        let mut event = samples::change_event();
        event.downloaded = false;
        assert!(event.validate().unwrap_err().to_string().contains("did not download"));
        let mut event = samples::change_event();
        event.first_seen = true;
        assert!(event.validate().unwrap_err().to_string().contains("first download"));
        let mut event = samples::change_event();
        event.changed = None;
        assert!(event.validate().unwrap_err().to_string().contains("where changed is null"));
        let mut estimate = samples::page_estimate();
        estimate.last_request.downloaded = false;
        assert!(estimate.validate().unwrap_err().to_string().contains("last_request.changed"));
        // The scheduler keeps the validators and puts them on the URL's picks: one that no
        // pick may carry would leave the URL unfetched for good.
        let mut estimate = samples::page_estimate();
        estimate.last_request.etag = Some("e".repeat(bounds::MAX_HEADER_BYTES + 1));
        assert!(estimate.validate().unwrap_err().to_string().contains("last_request.etag"));
        let mut result = samples::fetch_result();
        result.content_type = Some("t".repeat(bounds::MAX_HEADER_BYTES + 1));
        assert!(result.validate().unwrap_err().to_string().contains("content_type"));
        // The exchange the archive writes out: bounded on each side, its address an address.
        assert_eq!(samples::fetch_result_with_exchange().validate(), Ok(()));
        let with_exchange = |change: &dyn Fn(&mut crate::HttpExchange)| {
            let mut result = samples::fetch_result_with_exchange();
            result.exchange.as_mut().map(change);
            result.validate().unwrap_err().to_string()
        };
        let long = crate::HttpHeader { name: "x".into(), value: vec![b'v'; bounds::MAX_HEADER_BYTES + 1] };
        assert!(
            with_exchange(&|e| e.response_headers.push(long.clone())).contains("exchange.response_headers")
        );
        let many = crate::HttpHeader { name: "x".into(), value: b"v".to_vec() };
        let too_many = bounds::MAX_EXCHANGE_HEADERS;
        assert!(with_exchange(&|e| e.request_headers.extend(vec![many.clone(); too_many]))
            .contains("exchange.request_headers"));
        let large = crate::HttpHeader { name: "x".into(), value: vec![b'v'; bounds::MAX_HEADER_BYTES] };
        let past_total = bounds::MAX_EXCHANGE_HEADER_BYTES / bounds::MAX_HEADER_BYTES;
        assert!(with_exchange(&|e| e.response_headers.extend(vec![large.clone(); past_total]))
            .contains("more than 32768"));
        assert!(with_exchange(&|e| e.remote_ip = Some("example.com".into())).contains("exchange.remote_ip"));
        assert!(with_exchange(&|e| e.method = "G".repeat(33)).contains("exchange.method"));
        // Written out, a line break would end the line and start a header of its own.
        let injected = crate::HttpHeader { name: "x".into(), value: b"1\r\nWARC-Type: forged".to_vec() };
        assert!(with_exchange(&|e| e.response_headers.push(injected.clone())).contains("line break"));
        assert!(with_exchange(&|e| e.target = "/a\nb".into()).contains("target"));
        let unnamed = crate::HttpHeader { name: "x: y".into(), value: Vec::new() };
        assert!(with_exchange(&|e| e.request_headers.push(unnamed.clone())).contains("header name"));
        let mut event = samples::change_event();
        event.page.host.clear();
        assert_eq!(event.validate().map_err(|e| e.to_string()), Err("page.host is empty".into()));
        let mut event = samples::change_event();
        event.page.host = "elsewhere.example".into();
        event.page.site = "elsewhere.example".into();
        assert_eq!(
            event.validate().map_err(|e| e.to_string()),
            Err(r#"page.host is "elsewhere.example", the host of page.url is "example.com""#.into())
        );
        let mut event = samples::change_event();
        event.page.url = "urn:isbn:0451450523".into();
        assert!(event.validate().unwrap_err().to_string().starts_with("page.url: "));
        let mut event = samples::change_event();
        event.page.site = "attacker.example".into();
        assert_eq!(
            event.validate().map_err(|e| e.to_string()),
            Err(r#"page.site is "attacker.example", the site of "example.com" is "example.com""#.into())
        );
        // A pick under another host than its URL's would be fetched under that host's
        // politeness gate; a URL with credentials reaches no topic.
        let mut pick = samples::page_pick();
        pick.host = "elsewhere.example".into();
        assert_eq!(
            pick.validate().map_err(|e| e.to_string()),
            Err(r#"host is "elsewhere.example", the host of url is "example.com""#.into())
        );
        let mut result = samples::fetch_result();
        result.host = "elsewhere.example".into();
        assert!(result.validate().unwrap_err().to_string().starts_with("host is"));
        let mut pick = samples::page_pick();
        pick.url = "http://user:SECRETPW@example.com/a.html".into();
        assert_eq!(
            pick.validate().map_err(|e| e.to_string()),
            Err("url: URL carries a user name or password".into())
        );
        let mut event = samples::change_event();
        event.page.url = "http://user:SECRETPW@example.com/a.html".into();
        assert_eq!(
            event.validate().map_err(|e| e.to_string()),
            Err("page.url: URL carries a user name or password".into())
        );
        let mut result = samples::fetch_result();
        result.redirects = vec!["https://user:pw@example.com/b?next=x@y".into()];
        assert_eq!(
            result.validate().map_err(|e| e.to_string()),
            Err("a redirect carries a user name or password".into())
        );
        result.redirects = vec!["https://example.com/b?next=x@y".into()];
        result.final_url = Some("https://example.com/@me".into());
        assert_eq!(result.validate(), Ok(()));
        let mut event = samples::change_event();
        event.fetched_at = crate::UtcTime::from_ms(event.fetched_at_ms + 1);
        assert_eq!(event.validate().map_err(|e| e.to_string()),
            Err("fetched_at 2026-05-28T20:26:40.001Z and fetched_at_ms 1780000000000 are not the same instant".into())
        );
        // Every estimator sums the shares of all partitions: no count may overflow that.
        assert_eq!(samples::group_distribution().validate(), Ok(()));
        let mut share = samples::group_distribution();
        share.urls = u64::MAX;
        assert!(share.validate().unwrap_err().to_string().contains("urls"));
        let mut share = samples::group_distribution();
        share.modification_rate_fine[7] = u64::MAX;
        assert!(share.validate().unwrap_err().to_string().contains("modification_rate_fine"));
        let mut share = samples::group_distribution();
        share.download_rate_fine = vec![0; 1_000_000];
        assert!(share.validate().unwrap_err().to_string().contains("download_rate_fine"));
        let mut share = samples::group_distribution();
        share.group = "g".repeat(bounds::MAX_HOST_BYTES + 1);
        assert!(share.validate().unwrap_err().to_string().contains("group"));
        let mut share = samples::group_distribution();
        share.partition = -1;
        assert!(share.validate().unwrap_err().to_string().contains("partition"));
    }

    #[test]
    fn kafka_headers_mirror_the_payload() {
        let bytes = encode(&samples::page_pick()).unwrap();
        let [(ct_name, ct), (sv_name, sv)] = kafka_headers::<PagePick>();
        assert_eq!((ct_name, sv_name), (CONTENT_TYPE_HEADER, SCHEMA_VERSION_HEADER));
        assert_eq!(check_kafka_headers(&bytes, Some(ct.as_bytes()), Some(sv.as_bytes())), Ok(()));
        assert_eq!(check_kafka_headers(&bytes, None, None), Ok(()));
        assert!(matches!(
            check_kafka_headers(&bytes, Some(JSON_CONTENT_TYPE.as_bytes()), None),
            Err(EnvelopeError::HeaderMismatch { header: CONTENT_TYPE_HEADER, .. })
        ));
        assert!(matches!(
            check_kafka_headers(&bytes, None, Some(b"7")),
            Err(EnvelopeError::HeaderMismatch { header: SCHEMA_VERSION_HEADER, .. })
        ));
        let json = encode(&samples::change_event()).unwrap();
        let [(_, ct), (_, sv)] = kafka_headers::<ChangeEvent>();
        assert_eq!((ct.as_str(), sv.as_str()), (JSON_CONTENT_TYPE, "2"));
        assert_eq!(check_kafka_headers(&json, Some(ct.as_bytes()), Some(sv.as_bytes())), Ok(()));
        assert_eq!(inspect(&json).unwrap().kafka_headers(), kafka_headers::<ChangeEvent>());
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::{
        ChangeEvent, DiscoveredLinks, FetchResult, GroupDistribution, HostTrust, PageAnnouncement,
        PageEstimate, PagePick, PickReason,
    };

    proptest! {
        /// Whatever arrives on a topic, decoding returns a value or a typed error.
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode::<PagePick>(&bytes);
            let _ = decode::<FetchResult>(&bytes);
            let _ = decode::<DiscoveredLinks>(&bytes);
            let _ = decode::<ChangeEvent>(&bytes);
            let _ = decode::<PageEstimate>(&bytes);
            let _ = decode::<GroupDistribution>(&bytes);
            let _ = decode::<PageAnnouncement>(&bytes);
            let _ = decode::<HostTrust>(&bytes);
        }

        /// The same behind a valid header, so the payload decoders themselves are hit.
        #[test]
        fn arbitrary_payloads_behind_a_valid_header_never_panic(
            format in 1u8..=2,
            body in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            let mut bytes = vec![MAGIC, format, 0, 1];
            bytes.extend_from_slice(&body);
            let _ = decode::<PagePick>(&bytes);
            let _ = decode::<ChangeEvent>(&bytes);
            let _ = decode::<FetchResult>(&bytes);
            let _ = decode::<PageEstimate>(&bytes);
            // Behind a JSON tag of either version a reader takes.
            for version in ["1", "2"] {
                let mut tagged = format!("{{\"schema\":\"recrawl.change-event/{version}\",").into_bytes();
                tagged.extend_from_slice(&body);
                let _ = decode::<ChangeEvent>(&tagged);
            }
        }

        #[test]
        fn picks_round_trip(url in "\\PC{0,80}", period in any::<u64>(), score in any::<f64>(), discovery in any::<bool>()) {
            let pick = PagePick {
                url_key: crate::url_key(&url),
                host: url.chars().take(10).collect(),
                group: "g".into(),
                url,
                period,
                reason: if discovery { PickReason::Discovery } else { PickReason::Refresh },
                depth: 2,
                score,
                etag: discovery.then(|| "\"e\"".to_owned()),
                last_modified: None,
                deadline_ms: Some(period as i64),
            };
            let decoded = decode::<PagePick>(&encode(&pick).unwrap()).unwrap();
            // Compare bit patterns: NaN scores must survive too.
            prop_assert_eq!(decoded.score.to_bits(), pick.score.to_bits());
            prop_assert_eq!((decoded.url, decoded.period, decoded.reason, decoded.etag, decoded.deadline_ms), (pick.url, pick.period, pick.reason, pick.etag, pick.deadline_ms));
        }
    }
}
