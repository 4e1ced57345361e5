//! WARC/1.1 records (ISO 28500:2017), each written as a gzip member of its own so that a
//! reader can seek to any record by the offset its index line gives.
//!
//! Digests are SHA-1 in base32 (`sha1:` and 32 letters), as Heritrix, warcio and pywb
//! write and verify them. Record ids are UUIDs derived from what the record is (its type,
//! target and date), so a record written again after a crash has the id it had.

use flate2::{Compress, Compression, Crc, FlushCompress, Status};
use recrawl_schemas::UtcTime;
use sha1::{Digest as _, Sha1};

pub const WARC_VERSION: &str = "WARC/1.1";
pub const PROFILE_IDENTICAL_PAYLOAD: &str =
    "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest";
pub const PROFILE_SERVER_NOT_MODIFIED: &str = "http://netpreserve.org/warc/1.1/revisit/server-not-modified";
const CONFORMS_TO: &str = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/";
const CRLF: &[u8] = b"\r\n";

/// A SHA-1 digest.
pub type Sha1Bytes = [u8; 20];

pub fn sha1(bytes: &[u8]) -> Sha1Bytes {
    Sha1::digest(bytes).into()
}

/// `sha1:` and the digest in RFC 4648 base32 (32 letters, no padding for 20 bytes).
pub fn digest_text(digest: &Sha1Bytes) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut text = String::with_capacity(37);
    text.push_str("sha1:");
    // 20 bytes are 160 bits: eight 5-bit letters per 5 bytes, no remainder.
    for chunk in digest.chunks(5) {
        let bits = chunk.iter().fold(0u64, |bits, &byte| (bits << 8) | u64::from(byte));
        for shift in [35, 30, 25, 20, 15, 10, 5, 0] {
            let index = (bits >> shift) & 0x1f;
            text.push(char::from(ALPHABET[index as usize]));
        }
    }
    text
}

/// An instant as a WARC-Date, to the second (`2026-12-01T12:00:05Z`): the precision of the
/// 14-digit timestamps indexes and replay tools key captures by.
pub fn warc_date(unix_ms: i64) -> String {
    let text = UtcTime::from_ms(unix_ms).to_string();
    format!("{}Z", &text[..19])
}

/// An instant as the 14-digit timestamp of index lines and replay URLs (`20261201120005`).
pub fn timestamp14(unix_ms: i64) -> String {
    UtcTime::from_ms(unix_ms).to_string().chars().take(19).filter(char::is_ascii_digit).collect()
}

/// An instant to the millisecond as file names carry it (`20261201120005123`).
pub fn timestamp17(unix_ms: i64) -> String {
    UtcTime::from_ms(unix_ms).to_string().chars().filter(char::is_ascii_digit).collect()
}

/// `<urn:uuid:…>` derived from `parts`: a name-based UUID (version 5's layout, SHA-1).
pub fn record_id(parts: &[&[u8]]) -> String {
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    let hash: Sha1Bytes = hasher.finalize().into();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hash[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x50;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("<urn:uuid:{}-{}-{}-{}-{}>", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// The WARC-Type of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordType {
    Warcinfo,
    Request,
    Response,
    Revisit,
}

impl RecordType {
    pub const ALL: [Self; 4] = [Self::Warcinfo, Self::Request, Self::Response, Self::Revisit];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Warcinfo => "warcinfo",
            Self::Request => "request",
            Self::Response => "response",
            Self::Revisit => "revisit",
        }
    }
}

/// One record: its named fields (WARC-Type first, Content-Length added when written) and
/// its block, the head (an HTTP message's status line and headers, a warcinfo's fields)
/// followed by the payload.
#[derive(Debug)]
pub struct Record<'a> {
    pub kind: RecordType,
    pub fields: Vec<(&'static str, String)>,
    pub head: Vec<u8>,
    pub payload: &'a [u8],
}

impl Record<'_> {
    /// Adds `WARC-Block-Digest` over the head and payload.
    pub fn with_block_digest(mut self) -> Self {
        let mut hasher = Sha1::new();
        hasher.update(&self.head);
        hasher.update(self.payload);
        let digest: Sha1Bytes = hasher.finalize().into();
        self.fields.push(("WARC-Block-Digest", digest_text(&digest)));
        self
    }

    /// The record as a gzip member, appended to `out`.
    pub fn write_gzip(&self, gzip: &mut Gzip, out: &mut Vec<u8>) -> Result<(), GzipError> {
        let mut header = Vec::with_capacity(512);
        header.extend_from_slice(WARC_VERSION.as_bytes());
        header.extend_from_slice(CRLF);
        header.extend_from_slice(b"WARC-Type: ");
        header.extend_from_slice(self.kind.as_str().as_bytes());
        header.extend_from_slice(CRLF);
        for (name, value) in &self.fields {
            header.extend_from_slice(name.as_bytes());
            header.extend_from_slice(b": ");
            header.extend_from_slice(value.as_bytes());
            header.extend_from_slice(CRLF);
        }
        let length = self.head.len().saturating_add(self.payload.len());
        header.extend_from_slice(format!("Content-Length: {length}\r\n\r\n").as_bytes());
        gzip.member(&[&header, &self.head, self.payload, b"\r\n\r\n"], out)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("gzip: {0}")]
pub struct GzipError(String);

/// Writes gzip members (RFC 1952), one per record, with one deflate state reused from
/// member to member: a fresh one (what `GzEncoder::new` makes) costs more than deflating a
/// small record, and most records (requests, revisits) are small.
#[derive(Debug)]
pub struct Gzip {
    deflate: Compress,
}

impl Gzip {
    pub fn new(level: Compression) -> Self {
        Self { deflate: Compress::new(level, false) }
    }

    /// `parts`, one after the other, as one gzip member appended to `out`.
    pub fn member(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) -> Result<(), GzipError> {
        self.deflate.reset();
        // No name, no time, unknown OS: members of the same record are the same bytes.
        out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
        let mut crc = Crc::new();
        for part in parts {
            crc.update(part);
            self.deflate_into(part, FlushCompress::None, out)?;
        }
        self.deflate_into(&[], FlushCompress::Finish, out)?;
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&crc.amount().to_le_bytes());
        Ok(())
    }

    fn deflate_into(
        &mut self,
        mut input: &[u8],
        flush: FlushCompress,
        out: &mut Vec<u8>,
    ) -> Result<(), GzipError> {
        loop {
            out.reserve((input.len() / 2).saturating_add(8192));
            let before = self.deflate.total_in();
            let status =
                self.deflate.compress_vec(input, out, flush).map_err(|e| GzipError(e.to_string()))?;
            let consumed =
                usize::try_from(self.deflate.total_in().saturating_sub(before)).unwrap_or(input.len());
            input = &input[consumed.min(input.len())..];
            let done = match flush {
                FlushCompress::Finish => status == Status::StreamEnd,
                _ => input.is_empty(),
            };
            if done {
                return Ok(());
            }
        }
    }
}

/// What the `warcinfo` record opening each file says.
#[derive(Debug, Clone)]
pub struct WarcInfo {
    pub software: String,
    pub operator: Option<String>,
    pub description: Option<String>,
    pub hostname: String,
}

impl WarcInfo {
    /// The warcinfo record of the file `filename` made at `unix_ms`, and its id.
    pub fn record(&self, filename: &str, unix_ms: i64) -> (Record<'static>, String) {
        let id = record_id(&[b"warcinfo", filename.as_bytes()]);
        let mut head = String::new();
        let mut field = |name: &str, value: &str| {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        };
        field("software", &self.software);
        field("format", "WARC File Format 1.1");
        field("conformsTo", CONFORMS_TO);
        field("hostname", &self.hostname);
        if let Some(operator) = &self.operator {
            field("operator", operator);
        }
        if let Some(description) = &self.description {
            field("description", description);
        }
        field("robots", "obey");
        let record = Record {
            kind: RecordType::Warcinfo,
            fields: vec![
                ("WARC-Date", warc_date(unix_ms)),
                ("WARC-Record-ID", id.clone()),
                ("WARC-Filename", filename.to_owned()),
                ("Content-Type", "application/warc-fields".to_owned()),
            ],
            head: head.into_bytes(),
            payload: &[],
        }
        .with_block_digest();
        (record, id)
    }
}

/// An HTTP message's start line and headers, ended by the empty line.
pub fn http_head<'a>(start_line: &str, headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let mut head = Vec::with_capacity(512);
    head.extend_from_slice(start_line.as_bytes());
    head.extend_from_slice(CRLF);
    for (name, value) in headers {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(CRLF);
    }
    head.extend_from_slice(CRLF);
    head
}

/// Whether a WARC field value from a flag can be written as is: no line breaks, which
/// would end the field.
pub fn is_field_value(text: &str) -> bool {
    !text.chars().any(|c| c == '\r' || c == '\n')
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    #[test]
    fn digests_are_base32_sha1_as_warc_tools_write_them() {
        // warcio and Heritrix: sha1 of the empty string, and of "hello".
        assert_eq!(digest_text(&sha1(b"")), "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
        assert_eq!(digest_text(&sha1(b"hello")), "sha1:VL2MMHO4YXUKFWV63YHTWSBM3GXKSQ2N");
    }

    #[test]
    fn dates_and_timestamps_are_to_the_second_and_the_millisecond() {
        let at = 1_764_590_405_123;
        assert_eq!(warc_date(at), "2025-12-01T12:00:05Z");
        assert_eq!(timestamp14(at), "20251201120005");
        assert_eq!(timestamp17(at), "20251201120005123");
    }

    #[test]
    fn record_ids_are_uuids_of_what_the_record_is() {
        let id = record_id(&[b"response", b"http://a/", b"1"]);
        assert_eq!(id, record_id(&[b"response", b"http://a/", b"1"]));
        assert_ne!(id, record_id(&[b"response", b"http://a/1", b""]), "parts are delimited");
        let uuid = id.strip_prefix("<urn:uuid:").and_then(|rest| rest.strip_suffix('>')).unwrap();
        let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert_eq!(&uuid[14..15], "5", "version 5's layout");
        assert!(matches!(&uuid[19..20], "8" | "9" | "a" | "b"), "RFC 4122 variant");
    }

    #[test]
    fn a_member_of_a_large_payload_reads_back_whole() {
        let payload: Vec<u8> =
            (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let mut gzip = Gzip::new(Compression::fast());
        let mut bytes = Vec::new();
        gzip.member(&[b"head", &payload], &mut bytes).unwrap();
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut back).unwrap();
        assert_eq!(&back[..4], b"head");
        assert!(back[4..] == payload[..]);
    }

    #[test]
    fn a_record_is_one_gzip_member_with_its_length_and_block_digest() {
        let head = http_head("HTTP/1.1 200 OK", [("content-type", &b"text/html"[..])]);
        let record = Record {
            kind: RecordType::Response,
            fields: vec![("WARC-Target-URI", "http://example.com/".to_owned())],
            head,
            payload: b"<p>hi</p>",
        }
        .with_block_digest();
        let mut gzip = Gzip::new(Compression::default());
        let mut bytes = Vec::new();
        record.write_gzip(&mut gzip, &mut bytes).unwrap();
        // The deflate state is reused: the next member is whole too, and equal.
        let first = bytes.len();
        record.write_gzip(&mut gzip, &mut bytes).unwrap();
        assert_eq!(bytes[..first], bytes[first..]);
        let mut decoder = flate2::read::MultiGzDecoder::new(&bytes[..]);
        let mut both = String::new();
        decoder.read_to_string(&mut both).unwrap();
        assert_eq!(both.len(), 2 * (both.len() / 2));
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut text).unwrap();
        let block = "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\n<p>hi</p>";
        assert_eq!(
            text,
            format!(
                "WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: http://example.com/\r\n\
                 WARC-Block-Digest: {}\r\nContent-Length: {}\r\n\r\n{block}\r\n\r\n",
                digest_text(&sha1(block.as_bytes())),
                block.len()
            )
        );
    }
}
