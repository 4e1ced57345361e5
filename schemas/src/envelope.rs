//! The envelope: `[magic, format, version hi, version lo]` before every payload, mirrored
//! in the Kafka headers `content-type` and `schema-version`. This module is the only place
//! that calls bincode (pinned `=2.0.1`, unmaintained upstream), so replacing it is local.

use serde::{de::DeserializeOwned, Serialize};
use thiserror::Error;

/// First byte of every recrawl payload; not a byte any JSON or text value starts with.
pub const MAGIC: u8 = 0xC5;
/// Version of every message and state type in this crate; bump on any incompatible change.
pub const SCHEMA_VERSION: u16 = 1;
pub const HEADER_LEN: usize = 4;
/// Largest bincode body accepted. bincode allocates a collection's claimed length before
/// reading it, so without a limit a corrupt length prefix aborts the process on
/// allocation; with it, the claim fails as a decode error. The fetch stage's body cap
/// stays below this.
pub const MAX_BINCODE_BODY: usize = 64 << 20;
pub const CONTENT_TYPE_HEADER: &str = "content-type";
pub const SCHEMA_VERSION_HEADER: &str = "schema-version";

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

    /// The `content-type` Kafka header value for this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Bincode => "application/vnd.recrawl+bincode",
            Self::Json => "application/vnd.recrawl+json",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Bincode => "bincode",
            Self::Json => "json",
        }
    }
}

/// A type that travels in an envelope. `NAME` is the payload name used in the topic
/// catalogue and the JSON Schema file names.
pub trait Message: Serialize + DeserializeOwned {
    const NAME: &'static str;
    const FORMAT: Format;

    /// Checks what a decoded message holds against [`bounds`](crate::messages::bounds),
    /// so that no field from a topic can overflow a stage's arithmetic or memory; the
    /// error names the field.
    fn validate(&self) -> Result<(), String> {
        Ok(())
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
    #[error("bad magic byte 0x{0:02x} (expected 0x{MAGIC:02x}): not a recrawl payload")]
    BadMagic(u8),
    #[error("unknown format byte {0}")]
    UnknownFormat(u8),
    #[error("payload is {found}, {expected} expects {expected_format}")]
    WrongFormat { expected: &'static str, expected_format: &'static str, found: &'static str },
    #[error("unknown schema version {found} (this build reads {SCHEMA_VERSION})")]
    UnknownVersion { found: u16 },
    #[error("Kafka header {header} is {found:?}, the envelope says {expected:?}")]
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

/// Encodes `message` with its envelope header.
pub fn encode<M: Message>(message: &M) -> Result<Vec<u8>, EnvelopeError> {
    let [version_hi, version_lo] = SCHEMA_VERSION.to_be_bytes();
    let mut out = vec![MAGIC, M::FORMAT as u8, version_hi, version_lo];
    let encode_error = |reason: String| EnvelopeError::Encode { name: M::NAME, reason };
    match M::FORMAT {
        Format::Bincode => {
            bincode::serde::encode_into_std_write(message, &mut out, bincode_config())
                .map_err(|e| encode_error(e.to_string()))?;
            // Encoding does not enforce the limit; refuse here what decoding would refuse.
            let body_len = out.len().saturating_sub(HEADER_LEN);
            if body_len > MAX_BINCODE_BODY {
                return Err(encode_error(format!(
                    "{body_len} bytes exceed the {MAX_BINCODE_BODY}-byte limit"
                )));
            }
        }
        Format::Json => serde_json::to_writer(&mut out, message).map_err(|e| encode_error(e.to_string()))?,
    }
    Ok(out)
}

/// Decodes a payload written by [`encode`], checking the header before the body.
pub fn decode<M: Message>(bytes: &[u8]) -> Result<M, EnvelopeError> {
    let format = check_header(bytes)?;
    if format != M::FORMAT {
        return Err(EnvelopeError::WrongFormat {
            expected: M::NAME,
            expected_format: M::FORMAT.name(),
            found: format.name(),
        });
    }
    let body = &bytes[HEADER_LEN..];
    let payload_error = |reason: String| EnvelopeError::Payload { name: M::NAME, reason };
    match format {
        Format::Bincode => {
            let (message, read) = bincode::serde::decode_from_slice(body, bincode_config())
                .map_err(|e| payload_error(e.to_string()))?;
            if read != body.len() {
                return Err(payload_error(format!("{} trailing bytes", body.len().saturating_sub(read))));
            }
            Ok(message)
        }
        Format::Json => serde_json::from_slice(body).map_err(|e| payload_error(e.to_string())),
    }
}

/// Validates the 4-byte header and returns the payload's format.
pub fn check_header(bytes: &[u8]) -> Result<Format, EnvelopeError> {
    let [magic, format, version_hi, version_lo, ..] = *bytes else {
        return Err(EnvelopeError::Truncated { len: bytes.len() });
    };
    if magic != MAGIC {
        return Err(EnvelopeError::BadMagic(magic));
    }
    let format = Format::from_byte(format).ok_or(EnvelopeError::UnknownFormat(format))?;
    let version = u16::from_be_bytes([version_hi, version_lo]);
    if version != SCHEMA_VERSION {
        return Err(EnvelopeError::UnknownVersion { found: version });
    }
    Ok(format)
}

/// The Kafka headers that mirror the envelope of a `M` payload.
pub fn kafka_headers<M: Message>() -> [(&'static str, String); 2] {
    [
        (CONTENT_TYPE_HEADER, M::FORMAT.content_type().to_owned()),
        (SCHEMA_VERSION_HEADER, SCHEMA_VERSION.to_string()),
    ]
}

/// Checks that Kafka headers, where present, agree with the envelope of `bytes`.
/// A producer that sets no headers is accepted: the in-band header is authoritative.
pub fn check_kafka_headers(
    bytes: &[u8],
    content_type: Option<&[u8]>,
    schema_version: Option<&[u8]>,
) -> Result<(), EnvelopeError> {
    let format = check_header(bytes)?;
    if let Some(found) = content_type {
        let found = String::from_utf8_lossy(found);
        if found != format.content_type() {
            return Err(EnvelopeError::HeaderMismatch {
                header: CONTENT_TYPE_HEADER,
                found: found.into_owned(),
                expected: format.content_type().to_owned(),
            });
        }
    }
    if let Some(found) = schema_version {
        let found = String::from_utf8_lossy(found);
        if found != SCHEMA_VERSION.to_string() {
            return Err(EnvelopeError::HeaderMismatch {
                header: SCHEMA_VERSION_HEADER,
                found: found.into_owned(),
                expected: SCHEMA_VERSION.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::samples;
    use crate::{ChangeEvent, PagePick};

    #[test]
    fn round_trips_both_formats() {
        let pick = samples::page_pick();
        let bytes = encode(&pick).unwrap();
        assert_eq!(&bytes[..4], &[MAGIC, 1, 0, 1]);
        assert_eq!(decode::<PagePick>(&bytes).unwrap(), pick);

        let event = samples::change_event();
        let bytes = encode(&event).unwrap();
        assert_eq!(&bytes[..4], &[MAGIC, 2, 0, 1]);
        // Analysts read the JSON after the 4-byte header.
        let json: serde_json::Value = serde_json::from_slice(&bytes[4..]).unwrap();
        assert_eq!(json["url"], event.url);
        assert_eq!(decode::<ChangeEvent>(&bytes).unwrap(), event);
    }

    #[test]
    fn every_decode_error_is_typed() {
        let good = encode(&samples::page_pick()).unwrap();
        for len in 0..HEADER_LEN {
            assert_eq!(decode::<PagePick>(&good[..len]), Err(EnvelopeError::Truncated { len }));
        }
        let mut bad = good.clone();
        bad[0] = b'{';
        assert_eq!(decode::<PagePick>(&bad), Err(EnvelopeError::BadMagic(b'{')));
        let mut bad = good.clone();
        bad[1] = 9;
        assert_eq!(decode::<PagePick>(&bad), Err(EnvelopeError::UnknownFormat(9)));
        let mut bad = good.clone();
        bad[2] = 0x12;
        assert_eq!(decode::<PagePick>(&bad), Err(EnvelopeError::UnknownVersion { found: 0x1201 }));
        let json = encode(&samples::change_event()).unwrap();
        assert!(matches!(decode::<PagePick>(&json), Err(EnvelopeError::WrongFormat { found: "json", .. })));
        // A body cut short, and one with bytes left over, are payload errors, not panics.
        assert!(matches!(decode::<PagePick>(&good[..good.len() - 3]), Err(EnvelopeError::Payload { .. })));
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(decode::<PagePick>(&long), Err(EnvelopeError::Payload { .. })));
        let mut garbage_json = json[..4].to_vec();
        garbage_json.extend_from_slice(b"{\"url\":");
        assert!(matches!(decode::<ChangeEvent>(&garbage_json), Err(EnvelopeError::Payload { .. })));
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
        assert!(pick.validate().unwrap_err().contains("url"));
        let mut pick = samples::page_pick();
        pick.period = u64::MAX;
        assert!(pick.validate().unwrap_err().contains("period"));
        let mut pick = samples::page_pick();
        pick.score = f64::NAN;
        assert!(pick.validate().unwrap_err().contains("score"));
        let mut result = samples::fetch_result();
        result.fetched_at_ms = -5;
        assert!(result.validate().unwrap_err().contains("fetched_at_ms"));
        let mut event = samples::change_event();
        event.host.clear();
        assert!(event.validate().unwrap_err().contains("host"));
        // Every estimator sums the shares of all partitions: no count may overflow that.
        assert_eq!(samples::group_distribution().validate(), Ok(()));
        let mut share = samples::group_distribution();
        share.urls = u64::MAX;
        assert!(share.validate().unwrap_err().contains("urls"));
        let mut share = samples::group_distribution();
        share.modification_rate_fine[7] = u64::MAX;
        assert!(share.validate().unwrap_err().contains("modification_rate_fine"));
        let mut share = samples::group_distribution();
        share.download_rate_fine = vec![0; 1_000_000];
        assert!(share.validate().unwrap_err().contains("download_rate_fine"));
        let mut share = samples::group_distribution();
        share.partition = -1;
        assert!(share.validate().unwrap_err().contains("partition"));
    }

    #[test]
    fn kafka_headers_mirror_the_envelope() {
        let bytes = encode(&samples::page_pick()).unwrap();
        let [(ct_name, ct), (sv_name, sv)] = kafka_headers::<PagePick>();
        assert_eq!((ct_name, sv_name), (CONTENT_TYPE_HEADER, SCHEMA_VERSION_HEADER));
        assert_eq!(check_kafka_headers(&bytes, Some(ct.as_bytes()), Some(sv.as_bytes())), Ok(()));
        assert_eq!(check_kafka_headers(&bytes, None, None), Ok(()));
        assert!(matches!(
            check_kafka_headers(&bytes, Some(b"application/vnd.recrawl+json"), None),
            Err(EnvelopeError::HeaderMismatch { header: CONTENT_TYPE_HEADER, .. })
        ));
        assert!(matches!(
            check_kafka_headers(&bytes, None, Some(b"7")),
            Err(EnvelopeError::HeaderMismatch { header: SCHEMA_VERSION_HEADER, .. })
        ));
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::{
        ChangeEvent, DiscoveredLinks, FetchResult, GroupDistribution, PageEstimate, PagePick, PickReason,
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
            let _ = decode::<FetchResult>(&bytes);
            let _ = decode::<ChangeEvent>(&bytes);
            let _ = decode::<PageEstimate>(&bytes);
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
